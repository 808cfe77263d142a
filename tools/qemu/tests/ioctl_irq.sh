# The ioctl suite on the simulated T8103 with the opt-in completion
# interrupt (completion_irq=1; the simulator raises the event interrupt on
# the engine's own line so the handler path runs).
COMPLETION_IRQ=1
. /tests/ioctl.sh
