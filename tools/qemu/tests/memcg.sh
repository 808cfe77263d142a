# kernel-2 U5 and N9: what a client makes the kernel keep is charged to its
# memory cgroup, so memory.max bounds one user's clients together (systemd
# gives each user's session a cgroup of its own). In a cgroup v2 directory
# with the memory controller: a program's private copy and its task-stream
# staging are charged to the creator; BOs over several files stop at
# memory.max with ENOMEM and no OOM kill; closing uncharges everything.
# Needs CONFIG_MEMCG (tools/kernel/sanitizers.config).
cg=/sys/fs/cgroup
[ -f $cg/cgroup.controllers ] || mount -t cgroup2 cgroup2 $cg || fail "cannot mount cgroup2"
grep -qw memory $cg/cgroup.controllers || fail "no memory controller (CONFIG_MEMCG)"
echo +memory >$cg/cgroup.subtree_control || fail "cannot enable the memory controller"
mkdir -p $cg/ane-user
modprobe ane sim_soc=0x8103
[ -c /dev/accel/accel0 ] || fail "no accel node"
# The suite runs inside the cgroup; the shell stays outside it.
sh -c "echo \$\$ >$cg/ane-user/cgroup.procs && exec ane-ioctl-tests --memcg $cg/ane-user" ||
	fail "memcg suite failed"
rmdir $cg/ane-user || fail "the cgroup still has tasks"
modprobe -r ane
kmemleak_scan
