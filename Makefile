# SPDX-License-Identifier: GPL-2.0-only OR MIT
#
# ane: Apple Neural Engine DRM accel driver.
#
#   make                 build ane.ko against KDIR (default: the running kernel)
#   make CLIPPY=1        the same, with clippy linting the driver
#   make fmt-check       rustfmt check of every Rust source
#   make demo            build everything in the project's chroot, boot QEMU,
#                        load and unload the driver, show what happened
#   make check           the gate CI runs (at most 60 minutes on 2 cores from an
#                        empty cache): host tests, the arm64 and sanitizer
#                        kernels' module builds and QEMU suites, installation
#   make check-full      every test: the gate, then all kernels and boots,
#                        fail-nth, failslab fuzz, the 10^4-call fuzz
#   make bench           benchmarks (printed, not tests)
#   make fuzz            ane-fuzz, 10^5 ioctls per simulated SoC table in QEMU
#                        (make check-full runs a 10^4 pass, make check 10^3)
#
# KDIR must be a configured kernel build tree with Rust support; see the check
# below for exactly what it needs. ARCH, LLVM and CROSS_COMPILE are passed
# through to the kernel build. The C compiler follows the kernel's: LLVM=1
# only when the kernel was built with clang (CONFIG_CC_IS_CLANG), so a
# GCC-built kernel (every Asahi kernel) gets GCC.

KDIR ?= /lib/modules/$(shell uname -r)/build
LLVM ?= $(shell grep -qx 'CONFIG_CC_IS_CLANG=y' $(KDIR)/include/config/auto.conf 2>/dev/null && echo 1)
KBUILD_ARGS := $(if $(LLVM),LLVM=$(LLVM)) $(if $(ARCH),ARCH=$(ARCH)) $(if $(CROSS_COMPILE),CROSS_COMPILE=$(CROSS_COMPILE)) \
	$(if $(CLIPPY),CLIPPY=$(CLIPPY)) $(if $(ANE_TEST),ANE_TEST=$(ANE_TEST)) $(if $(ANE_WERROR),ANE_WERROR=$(ANE_WERROR)) $(if $(V),V=$(V))

.PHONY: all modules kdir-check clean modules_install fmt fmt-check demo check check-full bench fuzz

all: modules

modules: kdir-check
	$(MAKE) -C $(KDIR) M=$(CURDIR) $(KBUILD_ARGS) modules

modules_install: kdir-check
	$(MAKE) -C $(KDIR) M=$(CURDIR) $(KBUILD_ARGS) modules_install

clean:
	@if [ -d "$(KDIR)" ]; then $(MAKE) -C $(KDIR) M=$(CURDIR) clean; fi
	rm -rf userspace/target

# A Rust module can only be built against a tree that carries the Rust
# metadata of the kernel it targets, and the driver needs DRM built in with
# the accel core and the Rust shmem GEM helper. Many distribution header
# packages omit rust/, so name exactly what is missing.
kdir-check:
	@kdir='$(KDIR)'; fail=0; \
	if [ ! -f "$$kdir/Makefile" ]; then \
		echo "ane: KDIR=$$kdir is not a kernel build tree (no Makefile)." >&2; \
		echo "ane: install the headers of your kernel or pass KDIR=/path/to/build." >&2; exit 1; \
	fi; \
	conf="$$kdir/include/config/auto.conf"; \
	if [ ! -f "$$conf" ]; then \
		echo "ane: $$kdir is not configured (no include/config/auto.conf)." >&2; exit 1; \
	fi; \
	for opt in CONFIG_RUST CONFIG_DRM CONFIG_DRM_ACCEL CONFIG_RUST_DRM_GEM_SHMEM_HELPER; do \
		if ! grep -qx "$$opt=y" "$$conf"; then \
			case $$opt in \
			CONFIG_RUST) why="the driver is written in Rust";; \
			CONFIG_DRM) why="the kernel crate only offers DRM when DRM is built in (=y), not a module";; \
			CONFIG_DRM_ACCEL) why="the driver registers a /dev/accel node";; \
			CONFIG_RUST_DRM_GEM_SHMEM_HELPER) why="buffers are shmem GEM objects (a hidden option: DRM_ASAHI selects it on Asahi kernels, DRM_TYR on others)";; \
			esac; \
			echo "ane: $$kdir lacks $$opt=y: $$why." >&2; fail=1; \
		fi; \
	done; \
	for f in rust/libkernel.rmeta rust/libmacros.so Module.symvers; do \
		if [ ! -e "$$kdir/$$f" ]; then \
			echo "ane: $$kdir lacks $$f: out-of-tree Rust modules need the kernel's Rust metadata and symbol versions" >&2; \
			echo "ane:   (Arch/Omarchy headers ship no rust/: run ane-rust-meta from the ane-rust-meta package to rebuild it;" >&2; \
			echo "ane:    Fedora's kernel-16k-devel ships it; see docs/install.md, 'Kernel headers')." >&2; \
			fail=1; \
		fi; \
	done; \
	exit $$fail

RUST_SOURCES = $(shell find drivers userspace -name '*.rs' -not -path '*/target/*')

fmt:
	rustfmt --edition 2021 --config-path .rustfmt.toml $(RUST_SOURCES)

fmt-check:
	rustfmt --edition 2021 --config-path .rustfmt.toml --check $(RUST_SOURCES)

demo:
	tools/demo.sh

check:
	tools/check.sh

check-full:
	tools/check.sh full


bench:
	tools/bench.sh

fuzz:
	tools/fuzz.sh
