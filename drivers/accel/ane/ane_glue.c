// SPDX-License-Identifier: GPL-2.0-only OR MIT
/*
 * The driver's C glue: the one place where it meets the kernel's driver
 * core, and the only version-sensitive code of the module.
 *
 * Everything here uses C APIs that are the same in every kernel the module
 * supports (7.1, 7.2, 7.3; docs/kernel-compat.md lists each with its 7.1
 * evidence). The Rust kernel crate's driver-core abstractions (platform
 * driver registration, device contexts, devres I/O memory, IRQ
 * registrations, module pointers) changed shape between 7.1 and 7.2, so
 * the driver does not use them: it registers its two platform drivers
 * here, with the OF tables (and so the module aliases) and dev_pm_ops,
 * and calls into Rust through one table of callbacks (ane_glue_ops).
 *
 * The rest are inline-only helpers the Rust side cannot call directly:
 * runtime PM (static inline wrappers in <linux/pm_runtime.h>), MMIO
 * accessors, the accel file operations. Each is a plain call of one
 * documented API sequence; policy lives in Rust (ext/).
 */

#include <asm/barrier.h>
#include <crypto/sha2.h>
#include <linux/capability.h>
#include <linux/cpufreq.h>
#include <linux/device.h>
#include <linux/dma-fence.h>
#include <linux/dma-fence-chain.h>
#include <linux/dma-mapping.h>
#include <linux/firmware.h>
#include <linux/highmem.h>
#include <linux/interrupt.h>
#include <linux/io.h>
#include <linux/mod_devicetable.h>
#include <linux/module.h>
#include <linux/of.h>
#include <linux/of_address.h>
#include <linux/of_device.h>
#include <linux/of_irq.h>
#include <linux/platform_device.h>
#include <linux/random.h>
#include <linux/pm_domain.h>
#include <linux/pm_qos.h>
#include <linux/pm_runtime.h>
#include <linux/gfp.h>
#include <linux/mm.h>
#include <linux/sizes.h>
#include <linux/slab.h>
#include <linux/soc/apple/rtkit.h>
#include <linux/vmalloc.h>
#include <linux/workqueue.h>
#include <drm/drm_accel.h>
#include <drm/drm_file.h>
#include <drm/drm_gem.h>
#include <drm/drm_ioctl.h>
#include <drm/drm_print.h>
#include <drm/drm_syncobj.h>

#include "ane_glue.h"

/* ---- platform drivers ------------------------------------------------ */

/*
 * The compatibles each driver binds. The SoC behind a compatible is Rust's
 * business (hw::soc::SocInfo::by_compatible); a host test
 * (hw::soc::tests::glue_tables_match) checks that these tables list exactly
 * the compatibles of hw::soc, each under the driver of its backend.
 */
static const struct of_device_id ane_glue_h13_of[] = {
	{ .compatible = "apple,t8103-ane" },
	{ .compatible = "apple,t6000-ane" },
	{}
};
MODULE_DEVICE_TABLE(of, ane_glue_h13_of);

static const struct of_device_id ane_glue_fw_of[] = {
	{ .compatible = "apple,t6020-ane" },
	{ .compatible = "apple,t6021-ane" },
	{}
};
MODULE_DEVICE_TABLE(of, ane_glue_fw_of);

/* The project's version (VERSION, passed in by Kbuild). */
#ifdef ANE_VERSION
MODULE_VERSION(ANE_VERSION);
#endif

/* The Rust callbacks, set by ane_glue_register() before any probe. */
static const struct ane_glue_ops *ane_ops;

static int ane_glue_probe(struct platform_device *pdev)
{
	const struct of_device_id *match;
	void *data = NULL;
	int ret;

	match = of_match_device(pdev->dev.driver->of_match_table, &pdev->dev);
	ret = ane_ops->probe(pdev, &pdev->dev, match ? match->compatible : NULL,
			     &data);
	if (ret)
		return ret;
	platform_set_drvdata(pdev, data);
	/* Runtime PM only once the data its callbacks use exists. */
	ane_glue_pm_enable(&pdev->dev, ane_ops->autosuspend_delay_ms());
	return 0;
}

static void ane_glue_remove(struct platform_device *pdev)
{
	void *data = platform_get_drvdata(pdev);

	ane_ops->unbind(pdev, &pdev->dev, data);
	/* No PM callback may run once the data is gone; power the device
	 * down here if runtime PM left it up. */
	if (ane_glue_pm_disable(&pdev->dev))
		ane_ops->runtime_suspend(data);
	platform_set_drvdata(pdev, NULL);
	ane_ops->release(data);
}

static int ane_glue_runtime_suspend(struct device *dev)
{
	return ane_ops->runtime_suspend(dev_get_drvdata(dev));
}

static int ane_glue_runtime_resume(struct device *dev)
{
	return ane_ops->runtime_resume(dev_get_drvdata(dev));
}

/*
 * System sleep (suspend, hibernation): the driver first stops starting jobs
 * and waits for the running one (a job holds a runtime-PM reference, which
 * pm_runtime_force_suspend() ignores), then the device is powered down.
 */
static int __maybe_unused ane_glue_sleep(struct device *dev)
{
	void *data = dev_get_drvdata(dev);
	int ret;

	ret = ane_ops->sleep_begin(data);
	if (ret)
		return ret;
	ret = pm_runtime_force_suspend(dev);
	if (ret)
		ane_ops->sleep_end(data);
	return ret;
}

static int __maybe_unused ane_glue_wake(struct device *dev)
{
	int ret = pm_runtime_force_resume(dev);

	ane_ops->sleep_end(dev_get_drvdata(dev));
	return ret;
}

/*
 * Reboot, power-off, kexec: no job may go on DMAing through DART tables in
 * memory the next kernel reuses (kernel-2 N10). Only a bound device has
 * data.
 */
static void ane_glue_shutdown(struct platform_device *pdev)
{
	void *data = platform_get_drvdata(pdev);

	if (data)
		ane_ops->shutdown(data);
}

static const struct dev_pm_ops ane_glue_pm_ops = {
	.runtime_suspend = ane_glue_runtime_suspend,
	.runtime_resume = ane_glue_runtime_resume,
	SET_SYSTEM_SLEEP_PM_OPS(ane_glue_sleep, ane_glue_wake)
};

/* H13 (the host drives the task manager). */
static struct platform_driver ane_glue_h13_driver = {
	.probe = ane_glue_probe,
	.remove = ane_glue_remove,
	.shutdown = ane_glue_shutdown,
	.driver = {
		.name = "ane",
		.of_match_table = ane_glue_h13_of,
		.pm = &ane_glue_pm_ops,
	},
};

/*
 * H14 (Linux starts the firmware). No sysfs bind/unbind: a released
 * coprocessor cannot be restarted without a reboot.
 */
static struct platform_driver ane_glue_fw_driver = {
	.probe = ane_glue_probe,
	.remove = ane_glue_remove,
	.shutdown = ane_glue_shutdown,
	.driver = {
		.name = "ane-fw",
		.of_match_table = ane_glue_fw_of,
		.pm = &ane_glue_pm_ops,
		.suppress_bind_attrs = true,
	},
};

int ane_glue_register(const struct ane_glue_ops *ops)
{
	int ret;

	ane_ops = ops;
	ret = platform_driver_register(&ane_glue_h13_driver);
	if (ret)
		return ret;
	ret = platform_driver_register(&ane_glue_fw_driver);
	if (ret)
		platform_driver_unregister(&ane_glue_h13_driver);
	return ret;
}

void ane_glue_unregister(void)
{
	platform_driver_unregister(&ane_glue_fw_driver);
	platform_driver_unregister(&ane_glue_h13_driver);
}

/* Keeps this module loaded until reboot (rmmod then fails with EBUSY). */
void ane_glue_module_pin(void)
{
	__module_get(THIS_MODULE);
}

/* The accel node's file operations, owned by this module (what
 * DEFINE_DRM_ACCEL_FOPS() defines, but visible to the Rust side). */
const struct file_operations ane_glue_accel_fops = {
	.owner = THIS_MODULE,
	DRM_ACCEL_FOPS,
	/* /proc/PID/fdinfo: drm-driver and drm-client-id from the DRM core,
	 * then the driver's drm_driver.show_fdinfo. */
	.show_fdinfo = drm_show_fdinfo,
};

/* One "KEY:<tab>VALUE UNIT" line of a DRM file's fdinfo
 * (Documentation/gpu/drm-usage-stats.rst); drm_printf is variadic. */
void ane_glue_fdinfo_u64(void *p, const char *key, u64 val, const char *unit)
{
	drm_printf(p, "%s:\t%llu%s\n", key, val, unit);
}

/* The drm-total-, drm-shared-, drm-resident- ... lines of every GEM object
 * the file holds a handle to. */
void ane_glue_fdinfo_memory(void *p, struct drm_file *file)
{
	drm_show_memory_stats(p, file);
}

/* ---- firmware files ---------------------------------------------------- */

/* request_firmware(), returning the blob's data and size for Rust. */
int ane_glue_request_firmware(struct device *dev, const char *name,
			      void **fw, const u8 **data, size_t *len)
{
	const struct firmware *f;
	int ret;

	ret = request_firmware(&f, name, dev);
	if (ret)
		return ret;
	*fw = (void *)f;
	*data = f->data;
	*len = f->size;
	return 0;
}

void ane_glue_release_firmware(void *fw)
{
	release_firmware(fw);
}

/* ---- register windows -------------------------------------------------- */

static void ane_glue_iounmap(void *addr);

/*
 * Maps @res without requesting it (another driver owns part of it),
 * non-posted where the bus says so, as devm_ioremap_resource() would; the
 * mapping goes away with the binding.
 */
static void __iomem *ane_glue_map_shared(struct device *dev,
					 const struct resource *res)
{
	void __iomem *base;

	if (res->flags & IORESOURCE_MEM_NONPOSTED)
		base = ioremap_np(res->start, resource_size(res));
	else
		base = ioremap(res->start, resource_size(res));
	if (!base)
		return IOMEM_ERR_PTR(-ENOMEM);
	if (devm_add_action_or_reset(dev, ane_glue_iounmap, (void __force *)base))
		return IOMEM_ERR_PTR(-ENOMEM);
	return base;
}

/*
 * Maps the device's memory resource @name (or, when @name is NULL, its
 * first one), which must span at least @min_size bytes, and stores its
 * physical start in @phys. With @claim the region is requested (the
 * device owns it alone); without, it is only mapped: the H14 block's
 * window contains the DARTs and the mailbox, whose drivers request their
 * own ranges, and the pmgr window lies inside the PMGR node. Unmapped by
 * devres after remove(); the Rust side revokes its accessors in remove().
 */
int ane_glue_ioremap(struct platform_device *pdev, const char *name,
		     size_t min_size, bool claim, void __iomem **out, u64 *phys)
{
	struct resource *res;
	void __iomem *base;

	if (name)
		res = platform_get_resource_byname(pdev, IORESOURCE_MEM, name);
	else
		res = platform_get_resource(pdev, IORESOURCE_MEM, 0);
	if (!res)
		return -ENODEV;
	if (resource_size(res) < min_size)
		return -EINVAL;
	if (claim)
		base = devm_ioremap_resource(&pdev->dev, res);
	else
		base = ane_glue_map_shared(&pdev->dev, res);
	if (IS_ERR(base))
		return PTR_ERR(base);
	*out = base;
	*phys = res->start;
	return 0;
}

#ifdef ANE_TEST
/*
 * Test flavour only: provoke one KASAN report, a read one byte past a
 * kmalloc'd buffer, so the QEMU harness can prove it fails a run on it
 * (the sanitizer kernel's canary). Never built for users.
 */
void ane_glue_selftest_kasan(void)
{
	volatile size_t past = 8;
	volatile char *p = kmalloc(8, GFP_KERNEL);

	if (!p)
		return;
	(void)p[past];
	kfree((void *)p);
}
#endif

/* A random u64 (the firmware's per-boot stack guard). */
u64 ane_glue_random_u64(void)
{
	return get_random_u64();
}

u32 ane_glue_readl(const void __iomem *addr)
{
	return readl(addr);
}

void ane_glue_writel(u32 val, void __iomem *addr)
{
	writel(val, addr);
}

u64 ane_glue_readq(const void __iomem *addr)
{
	return readq(addr);
}

void ane_glue_writeq(u64 val, void __iomem *addr)
{
	writeq(val, addr);
}

/* ---- CPU-cluster boost ------------------------------------------------- */

/*
 * CPU-cluster boost (omarchy-ane's ane_boost.c, measured on T8103: the
 * memory side follows the CPU clusters' performance state, and a Parakeet
 * encoder run went from 171 to 138 ms with the clusters held up): from the
 * start of a job until @idle_ms after the last one ended, a minimum-frequency
 * request at the top frequency on every cpufreq policy. The effect shows in
 * each policy's scaling_min_freq.
 *
 * Per job, begin and end take only the boost's mutex: end stamps the time
 * and arms the delayed work only when it is not already pending, and the
 * work, when it runs, re-arms itself for what is left of the delay after
 * the last end (or does nothing while a job runs) before it drops the
 * hold. So a busy engine costs two uncontended mutex sections per job, not
 * a synchronous cancel and a timer re-arm.
 */
#define ANE_BOOST_MAX_POLICIES 16

struct ane_glue_boost {
	struct delayed_work off;
	/* Protects everything below. */
	struct mutex lock;
	unsigned int idle_ms;
	bool on;
	/* Between begin and end. */
	bool active;
	/* jiffies at the last end. */
	unsigned long last_end;
	unsigned int n;
	struct cpufreq_policy *policy[ANE_BOOST_MAX_POLICIES];
	struct freq_qos_request req[ANE_BOOST_MAX_POLICIES];
};

/* Called with b->lock held (or once nothing else can reach @b). */
static void ane_glue_boost_release(struct ane_glue_boost *b)
{
	unsigned int i;

	for (i = 0; i < b->n; i++) {
		freq_qos_remove_request(&b->req[i]);
		cpufreq_cpu_put(b->policy[i]);
	}
	b->n = 0;
	b->on = false;
}

static void ane_glue_boost_off(struct work_struct *w)
{
	struct ane_glue_boost *b = container_of(to_delayed_work(w),
						struct ane_glue_boost, off);
	unsigned long now = jiffies, until;

	mutex_lock(&b->lock);
	until = b->last_end + msecs_to_jiffies(b->idle_ms);
	if (b->active) {
		/* A job runs: its end arms the work again. */
	} else if (time_before(now, until)) {
		/* One reading of jiffies: the rest of the delay, never negative. */
		queue_delayed_work(system_percpu_wq, &b->off, until - now);
	} else {
		ane_glue_boost_release(b);
	}
	mutex_unlock(&b->lock);
}

/* NULL when @idle_ms is 0 (boost off) or on allocation failure. */
struct ane_glue_boost *ane_glue_boost_new(unsigned int idle_ms)
{
	struct ane_glue_boost *b;

	if (!idle_ms)
		return NULL;
	b = kzalloc(sizeof(*b), GFP_KERNEL);
	if (!b)
		return NULL;
	INIT_DELAYED_WORK(&b->off, ane_glue_boost_off);
	mutex_init(&b->lock);
	b->idle_ms = idle_ms;
	return b;
}

/* A job starts: hold every policy's minimum at its top frequency. */
void ane_glue_boost_begin(struct ane_glue_boost *b)
{
	unsigned int cpu;

	if (!b)
		return;
	mutex_lock(&b->lock);
	b->active = true;
	if (!b->on) {
		b->on = true;
		for_each_possible_cpu(cpu) {
			struct cpufreq_policy *p;
			unsigned int i;
			bool seen = false;

			if (b->n == ANE_BOOST_MAX_POLICIES)
				break;
			p = cpufreq_cpu_get(cpu);
			if (!p)
				continue;
			for (i = 0; i < b->n; i++)
				seen |= b->policy[i] == p;
			if (seen || freq_qos_add_request(&p->constraints, &b->req[b->n],
							 FREQ_QOS_MIN,
							 p->cpuinfo.max_freq) < 0) {
				cpufreq_cpu_put(p);
				continue;
			}
			b->policy[b->n++] = p;
		}
	}
	mutex_unlock(&b->lock);
}

/* A job ended: the hold ends @idle_ms later unless another job starts. */
void ane_glue_boost_end(struct ane_glue_boost *b)
{
	if (!b)
		return;
	mutex_lock(&b->lock);
	b->active = false;
	b->last_end = jiffies;
	/* Already pending: it re-arms itself for the rest of the delay. */
	if (b->on)
		queue_delayed_work(system_percpu_wq, &b->off,
				   msecs_to_jiffies(b->idle_ms));
	mutex_unlock(&b->lock);
}

/*
 * The engine shut down (no job begins again): the hold ends now and no
 * work stays queued, so nothing of the boost runs module code later even
 * if the boost itself is never freed.
 */
void ane_glue_boost_stop(struct ane_glue_boost *b)
{
	if (!b)
		return;
	cancel_delayed_work_sync(&b->off);
	mutex_lock(&b->lock);
	ane_glue_boost_release(b);
	mutex_unlock(&b->lock);
}

void ane_glue_boost_free(struct ane_glue_boost *b)
{
	if (!b)
		return;
	/* Safe against the work's own re-arming. */
	cancel_delayed_work_sync(&b->off);
	ane_glue_boost_release(b);
	mutex_destroy(&b->lock);
	kfree(b);
}

/* ---- workqueue and privileges ------------------------------------------ */

/*
 * The engine's own queue for its worker: ordered (one job at a time) and
 * destroyed, after draining, at unbind, so no work item runs module code
 * after that.
 */
struct workqueue_struct *ane_glue_wq_alloc(void)
{
	return alloc_ordered_workqueue("ane", WQ_HIGHPRI | WQ_MEM_RECLAIM);
}

void ane_glue_wq_destroy(struct workqueue_struct *wq)
{
	destroy_workqueue(wq);
}

/*
 * Whether the caller may use the high job priority: CAP_SYS_NICE, as other
 * accel and GPU drivers require for priorities above normal.
 */
bool ane_glue_may_boost_priority(void)
{
	return capable(CAP_SYS_NICE);
}

/* ---- DART windows ------------------------------------------------------ */

static void ane_glue_iounmap(void *addr)
{
	iounmap((void __iomem *)addr);
}

/*
 * The @index-th DART of the device's "iommus" list: maps its registers for
 * reading (without requesting the region: the apple-dart driver owns it;
 * non-posted where the bus says so, as devm_ioremap_resource() would) and
 * returns its interrupt in @irq (0 if it has none). -ENOENT past the end of
 * the list. The mapping goes away with the binding.
 */
int ane_glue_dart_map(struct platform_device *pdev, unsigned int index,
		      size_t min_size, void __iomem **regs, int *irq)
{
	struct device *dev = &pdev->dev;
	struct of_phandle_args args;
	struct resource res;
	void __iomem *base;
	int ret;

	if (!dev->of_node)
		return -ENOENT;
	ret = of_parse_phandle_with_args(dev->of_node, "iommus", "#iommu-cells",
					 index, &args);
	if (ret)
		return -ENOENT;
	ret = of_address_to_resource(args.np, 0, &res);
	if (!ret) {
		ret = of_irq_get(args.np, 0);
		*irq = ret > 0 ? ret : 0;
		ret = ret == -EPROBE_DEFER ? ret : 0;
	}
	of_node_put(args.np);
	if (ret)
		return ret;
	if (resource_size(&res) < min_size)
		return -EINVAL;
	base = ane_glue_map_shared(dev, &res);
	if (IS_ERR(base))
		return PTR_ERR(base);
	*regs = base;
	return 0;
}

/* ---- interrupts -------------------------------------------------------- */

/* Masks an interrupt line (another driver's: the DART's) until enabled. */
void ane_glue_irq_disable(unsigned int irq)
{
	disable_irq(irq);
}

void ane_glue_irq_enable(unsigned int irq)
{
	enable_irq(irq);
}

/* Masks a line from its own handler. */
void ane_glue_irq_disable_nosync(unsigned int irq)
{
	disable_irq_nosync(irq);
}

/* The line at @index, or a negative errno (-ENXIO: the node has none). */
int ane_glue_irq_get_optional(struct platform_device *pdev, unsigned int index)
{
	return platform_get_irq_optional(pdev, index);
}

/*
 * A threaded handler: the hard handler only wakes the thread and the line
 * stays masked (IRQF_ONESHOT) until @thread_fn returned. Freed with
 * ane_glue_irq_free() (not devres: the Rust side frees it before the data
 * @cookie points into goes away).
 */
int ane_glue_irq_request(unsigned int irq, irq_handler_t thread_fn,
			 const char *name, void *cookie)
{
	return request_threaded_irq(irq, NULL, thread_fn, IRQF_ONESHOT, name,
				    cookie);
}

void ane_glue_irq_free(unsigned int irq, void *cookie)
{
	free_irq(irq, cookie);
}

void ane_glue_irq_synchronize(unsigned int irq)
{
	synchronize_irq(irq);
}

/* ---- runtime PM -------------------------------------------------------- */

/* Enable runtime PM for a device that probe left powered: active, with
 * autosuspend after @delay_ms of idleness. */
void ane_glue_pm_enable(struct device *dev, int delay_ms)
{
	pm_runtime_set_autosuspend_delay(dev, delay_ms);
	pm_runtime_use_autosuspend(dev);
	pm_runtime_get_noresume(dev);
	pm_runtime_set_active(dev);
	pm_runtime_enable(dev);
	pm_runtime_mark_last_busy(dev);
	pm_runtime_put_autosuspend(dev);
}

/* Disable runtime PM at unbind. Returns true when the device was left
 * active, so the caller powers it down itself. */
bool ane_glue_pm_disable(struct device *dev)
{
	bool active;

	pm_runtime_disable(dev);
	pm_runtime_dont_use_autosuspend(dev);
	active = !pm_runtime_status_suspended(dev);
	pm_runtime_set_suspended(dev);
	return active;
}

int ane_glue_pm_resume_and_get(struct device *dev)
{
	return pm_runtime_resume_and_get(dev);
}

/* pm_runtime_put_autosuspend() marks the device busy itself (7.2 and 7.3). */
void ane_glue_pm_put_autosuspend(struct device *dev)
{
	pm_runtime_put_autosuspend(dev);
}

/* The attached domain list's holder releases nothing (devres owns it). */
static void ane_glue_pd_list_release(struct device *dev, void *res)
{
}

/*
 * Attach every power domain of the device's node, in the order of its
 * "power-domains" list, with a runtime-PM device link to each (powered on
 * now: the device counts as active after probe). The platform bus attaches
 * a single domain itself and leaves lists of more to the driver. Detached
 * by devres. Returns how many domains the device is attached to.
 */
int ane_glue_pm_domains_attach(struct device *dev)
{
	static const struct dev_pm_domain_attach_data data = {
		.pd_flags = PD_FLAG_DEV_LINK_ON,
	};
	struct dev_pm_domain_list *list;
	struct dev_pm_domain_list **kept;
	int ret;

	ret = devm_pm_domain_attach_list(dev, &data, &list);
	if (ret == -EEXIST)
		return 1;	/* one domain, attached by the bus */
	if (ret <= 0)
		return ret;
	/*
	 * Kept for ane_glue_pm_cycle() in a devres of its own, released
	 * (without doing anything) before the list's, which was added first.
	 */
	kept = devres_alloc(ane_glue_pd_list_release, sizeof(*kept), GFP_KERNEL);
	if (!kept)
		return -ENOMEM;
	*kept = list;
	devres_add(dev, kept);
	return ret;
}

/*
 * The recovery's power cycle (the record's: every power domain of the
 * device cycled, then their state checked), at once rather than at the
 * next autosuspend, which any client's activity can postpone. The caller
 * holds a usage reference and nothing else may touch the hardware
 * meanwhile (it holds the engine).
 *
 * The device's own runtime-suspend callback runs first (through its
 * single domain's genpd, which then powers that domain off if the device
 * is alone in it), then each attached domain's virtual device is
 * suspended (genpd powers the domain off once nothing else in it is
 * active), then all are resumed in reverse order and the device's
 * runtime-resume callback runs. A usage reference is held on each
 * device around its cycle, so pm_runtime_force_resume() resumes it
 * (runtime PM never sees them suspended, and the device-link counts stay
 * as they were). Returns 0, or the first error; -EIO when a domain's
 * device is not active afterwards.
 */
int ane_glue_pm_cycle(struct device *dev)
{
	struct dev_pm_domain_list **kept;
	struct dev_pm_domain_list *list = NULL;
	unsigned int i, n = 0;
	int ret, err;

	kept = devres_find(dev, ane_glue_pd_list_release, NULL, NULL);
	if (kept && *kept) {
		list = *kept;
		n = list->num_pds;
	}
	pm_runtime_get_noresume(dev);
	ret = pm_runtime_force_suspend(dev);
	if (ret) {
		pm_runtime_put_noidle(dev);
		return ret;
	}
	for (i = 0; i < n; i++) {
		pm_runtime_get_noresume(list->pd_devs[i]);
		err = pm_runtime_force_suspend(list->pd_devs[i]);
		if (err && !ret)
			ret = err;
	}
	while (n--) {
		err = pm_runtime_force_resume(list->pd_devs[n]);
		if (!err && !pm_runtime_active(list->pd_devs[n]))
			err = -EIO;
		if (err && !ret)
			ret = err;
		pm_runtime_put_noidle(list->pd_devs[n]);
	}
	err = pm_runtime_force_resume(dev);
	if (!err && !pm_runtime_active(dev))
		err = -EIO;
	if (err && !ret)
		ret = err;
	pm_runtime_put_noidle(dev);
	return ret;
}

/*
 * Copies between part of a page and a kernel buffer (the caller checked
 * that offset + len stays within the page). The page may be mapped by
 * userspace and by the device, which may write it meanwhile; as any kernel
 * copy of user-shared memory, the bytes copied are then unspecified.
 */
void ane_glue_page_read(struct page *page, size_t offset, void *dst, size_t len)
{
	memcpy_from_page(dst, page, offset, len);
}

void ane_glue_page_write(struct page *page, size_t offset, const void *src, size_t len)
{
	memcpy_to_page(page, offset, src, len);
}

/* Copies between parts of two pages directly (one pass, no bounce buffer). */
void ane_glue_page_copy(struct page *dst, size_t dst_off, struct page *src, size_t src_off,
			size_t len)
{
	memcpy_page(dst, dst_off, src, src_off, len);
}

/*
 * A write-combined kernel mapping of @count pages (Normal non-cacheable on
 * arm64: the attribute the DMA API's coherent allocator gives the CPU side
 * of a device that is not DMA-coherent). NULL on failure. The caller
 * cleaned the pages' cacheable linear alias first (on hardware,
 * ane_glue_clean_for_device) and never accesses them through it.
 */
void *ane_glue_vmap_wc(struct page **pages, unsigned int count)
{
	return vmap(pages, count, VM_MAP, pgprot_writecombine(PAGE_KERNEL));
}

void ane_glue_vunmap(const void *addr)
{
	vunmap(addr);
}

/*
 * Copies through such a mapping (the caller checked the range). As for
 * the page copies above, the device or userspace may write the memory
 * meanwhile; the bytes copied are then unspecified.
 */
void ane_glue_wc_copy(void *dst, const void *src, size_t len)
{
	memcpy(dst, src, len);
}

/*
 * Writes back the CPU's cached lines of the pages in @sgt to memory, as
 * arch_dma_prep_coherent() does for dma_alloc_coherent() on a device that
 * is not DMA-coherent: a DMA-API mapping towards the device (its sync
 * cleans the lines) in the device's default domain, which the device does
 * not use while the driver's own domain is attached, then unmapped again
 * (towards the device, no CPU sync). No-op for a coherent device.
 */
int ane_glue_clean_for_device(struct device *dev, struct sg_table *sgt)
{
	int ret = dma_map_sgtable(dev, sgt, DMA_TO_DEVICE, 0);

	if (ret)
		return ret;
	dma_unmap_sgtable(dev, sgt, DMA_TO_DEVICE, 0);
	return 0;
}

/*
 * Ranges of page arrays (a BO's pages, in order): the caller checked that
 * each range lies within its array. One copy per run that stays inside a
 * page on both sides, yielding the CPU every MiB (a program's weights are
 * hundreds of MiB). As for the single-page copies above, a concurrent
 * writer of a source page leaves the copied bytes unspecified.
 *
 * A run that is a whole page on both sides (a program's weights are
 * copied page-aligned to page-aligned, in 4 KiB or 16 KiB pages) goes
 * through the architecture's page copy, copy_page(): on arm64 its
 * unrolled ldp/stp loop, on x86 `rep movsq` or an unrolled loop. That is
 * the copy the kernel's own copy_highpage() makes; copy_highpage() is not
 * called itself because on arm64 it would also carry the MTE tags of a
 * tagged source page over to the kernel's private page, which has no use
 * for them. Only partial pages take memcpy (on x86 with FSRM `rep movsb`,
 * which an instruction-counting emulator counts once per byte). A page
 * of a high-order folio is a page like any other here: each is mapped and
 * copied on its own.
 */
#define ANE_RESCHED_BYTES SZ_1M

static void ane_page_copy_run(struct page *dst, size_t d, struct page *src, size_t s, size_t n)
{
	void *to, *from;

	/* n == PAGE_SIZE implies d == s == 0. */
	if (n != PAGE_SIZE) {
		memcpy_page(dst, d, src, s, n);
		return;
	}
	to = kmap_local_page(dst);
	from = kmap_local_page(src);
	copy_page(to, from);
	kunmap_local(from);
	kunmap_local(to);
}

/* The same for a kernel buffer at @src into part of a page. */
static void ane_page_write_run(struct page *dst, size_t d, const void *src, size_t n)
{
	void *to;

	if (n != PAGE_SIZE || !PAGE_ALIGNED(src)) {
		memcpy_to_page(dst, d, src, n);
		return;
	}
	to = kmap_local_page(dst);
	copy_page(to, (void *)src);
	kunmap_local(to);
	flush_dcache_page(dst);
}

/* The same from part of a page into a kernel buffer at @dst. */
static void ane_page_read_run(void *dst, struct page *src, size_t s, size_t n)
{
	void *from;

	if (n != PAGE_SIZE || !PAGE_ALIGNED(dst)) {
		memcpy_from_page(dst, src, s, n);
		return;
	}
	from = kmap_local_page(src);
	copy_page(dst, from);
	kunmap_local(from);
}

/* Counts @n more bytes of a long copy, yielding the CPU every
 * ANE_RESCHED_BYTES (a shorter copy never sleeps). */
static void ane_copy_yield(size_t *since, size_t n)
{
	*since += n;
	if (*since >= ANE_RESCHED_BYTES) {
		cond_resched();
		*since = 0;
	}
}

void ane_glue_pages_copy(struct page **dst, size_t dst_off, struct page **src, size_t src_off,
			 size_t len)
{
	size_t since = 0;

	while (len) {
		size_t d = offset_in_page(dst_off), s = offset_in_page(src_off);
		size_t n = min3(len, PAGE_SIZE - d, PAGE_SIZE - s);

		ane_page_copy_run(dst[dst_off >> PAGE_SHIFT], d, src[src_off >> PAGE_SHIFT], s, n);
		dst_off += n;
		src_off += n;
		len -= n;
		ane_copy_yield(&since, n);
	}
}

void ane_glue_pages_write(struct page **dst, size_t dst_off, const void *src, size_t len)
{
	size_t since = 0;

	while (len) {
		size_t d = offset_in_page(dst_off);
		size_t n = min(len, PAGE_SIZE - d);

		ane_page_write_run(dst[dst_off >> PAGE_SHIFT], d, src, n);
		dst_off += n;
		src += n;
		len -= n;
		ane_copy_yield(&since, n);
	}
}

/*
 * Copies @len bytes at @src_off of the pages @src into the kernel buffer
 * @dst (not one of the pages), yielding the CPU every MiB of a long copy
 * (a shorter one never sleeps).
 */
void ane_glue_pages_read(void *dst, struct page **src, size_t src_off, size_t len)
{
	size_t since = 0;

	while (len) {
		size_t s = offset_in_page(src_off);
		size_t n = min(len, PAGE_SIZE - s);

		ane_page_read_run(dst, src[src_off >> PAGE_SHIFT], s, n);
		dst += n;
		src_off += n;
		len -= n;
		ane_copy_yield(&since, n);
	}
}

void ane_glue_pages_zero(struct page **dst, size_t dst_off, size_t len)
{
	while (len) {
		size_t d = offset_in_page(dst_off);
		size_t n = min(len, PAGE_SIZE - d);

		memzero_page(dst[dst_off >> PAGE_SHIFT], d, n);
		dst_off += n;
		len -= n;
	}
}

/*
 * The pages of a private program copy (gem.rs, create_private): a kernel
 * object nobody maps to user space, filled once and freed whole, so its
 * memory need not come page by page through shmem's page cache. It is
 * allocated in chunks as large as the buddy allocator gives without
 * effort (__GFP_NORETRY: no reclaim loop, no retries; __GFP_NOWARN: a
 * failed large order is expected), each chunk one folio, and
 * falls back to smaller orders down to single pages, which are allocated
 * as shmem allocates a BO's (may reclaim, no OOM kill). Once an order
 * fails no larger one is tried again, so a fragmented machine costs a
 * bounded number of failed attempts. The pages are charged to the
 * caller's memory cgroup (__GFP_ACCOUNT) and not zeroed: the caller
 * writes every byte before the device or anyone else can see them. No
 * movable zone: the pages stay pinned. Returns an array of @count page
 * pointers (in order; a chunk's pages are consecutive), or NULL with
 * nothing left allocated.
 */
#define ANE_CHUNK_GFP (GFP_KERNEL_ACCOUNT | __GFP_NORETRY | __GFP_NOWARN)
#define ANE_PAGE_GFP (GFP_KERNEL_ACCOUNT | __GFP_RETRY_MAYFAIL | __GFP_NOWARN)

struct page **ane_glue_chunks_alloc(unsigned long count)
{
	unsigned int order = MAX_PAGE_ORDER;
	struct page **pages;
	unsigned long i = 0, k;

	pages = kvmalloc_array(count, sizeof(*pages), GFP_KERNEL_ACCOUNT);
	if (!pages)
		return NULL;
	while (i < count) {
		struct folio *folio = NULL;

		while (order && (1UL << order) > count - i)
			order--;
		while (order) {
			folio = __folio_alloc(ANE_CHUNK_GFP, order, numa_mem_id(), NULL);
			if (folio)
				break;
			order--;
		}
		if (!folio)
			folio = __folio_alloc(ANE_PAGE_GFP, 0, numa_mem_id(), NULL);
		if (!folio) {
			ane_glue_chunks_free(pages, i);
			return NULL;
		}
		for (k = 0; k < (1UL << order); k++)
			pages[i + k] = folio_page(folio, k);
		i += 1UL << order;
		cond_resched();
	}
	return pages;
}

/*
 * Frees the first @count pages of an array from ane_glue_chunks_alloc
 * (all of them, or those allocated before a failure), one folio_put()
 * per chunk, and the array.
 */
void ane_glue_chunks_free(struct page **pages, unsigned long count)
{
	unsigned long i = 0;

	while (i < count) {
		struct folio *folio = page_folio(pages[i]);

		i += folio_nr_pages(folio);
		folio_put(folio);
	}
	kvfree(pages);
}

/* A GEM object without a shmem file (drm_gem_private_object_init). */
void ane_glue_gem_private_init(struct drm_device *dev, struct drm_gem_object *obj, size_t size)
{
	drm_gem_private_object_init(dev, obj, size);
}

void ane_glue_gem_private_release(struct drm_gem_object *obj)
{
	drm_gem_object_release(obj);
}

/* cond_resched() is a macro: a long copy yields the CPU between pieces. */
void ane_glue_cond_resched(void)
{
	cond_resched();
}

/*
 * SHA-256 from the kernel's crypto library (CONFIG_CRYPTO_LIB_SHA256): the
 * firmware pin and the H14 program digest. sha256_update() is an inline
 * over __sha256_update(); the context lives in storage the Rust caller
 * owns (ANE_GLUE_SHA256_CTX_BYTES, 8-byte aligned).
 */
static_assert(sizeof(struct sha256_ctx) <= ANE_GLUE_SHA256_CTX_BYTES);
static_assert(__alignof__(struct sha256_ctx) <= 8);

void ane_glue_sha256_init(void *ctx)
{
	sha256_init(ctx);
}

void ane_glue_sha256_update(void *ctx, const u8 *data, size_t len)
{
	sha256_update(ctx, data, len);
}

void ane_glue_sha256_final(void *ctx, u8 *out)
{
	sha256_final(ctx, out);
}

void ane_glue_sha256(const u8 *data, size_t len, u8 *out)
{
	sha256(data, len, out);
}

/* A full barrier for memory shared with a device (dma_mb() is a macro). */
void ane_glue_dma_mb(void)
{
	dma_mb();
}

/* A usage reference on a device that is active already (probe). */
void ane_glue_pm_get_noresume(struct device *dev)
{
	pm_runtime_get_noresume(dev);
}

#if IS_ENABLED(CONFIG_APPLE_RTKIT)
static void ane_glue_rtkit_crashed(void *cookie, const void *crashlog,
				   size_t size)
{
	dev_err(cookie, "ANE coprocessor crashed (RTKit crash log of %zu bytes)\n",
		size);
}

static void ane_glue_rtkit_recv(void *cookie, u8 endpoint, u64 message)
{
	dev_dbg(cookie, "RTKit endpoint %u: %#llx\n", endpoint, message);
}

static const struct apple_rtkit_ops ane_glue_rtkit_ops = {
	.crashed = ane_glue_rtkit_crashed,
	.recv_message = ane_glue_rtkit_recv,
};
#endif

/*
 * Optional RTKit management session over the coprocessor's mailbox (the
 * node's first "mboxes" entry), for firmware that speaks it. The kernel's
 * apple_rtkit bounds the wait for HELLO (-ETIME after 1 s). On failure
 * everything is released again, so a mailbox that was started does not
 * keep interrupting. Returns 0 and the session in @out, or -errno:
 * -ENODEV without a mailbox, -EOPNOTSUPP without CONFIG_APPLE_RTKIT.
 */
int ane_glue_rtkit_boot(struct device *dev, void **out)
{
#if IS_ENABLED(CONFIG_APPLE_RTKIT)
	struct apple_rtkit *rtk;
	int ret;

	if (!dev->of_node || !of_property_present(dev->of_node, "mboxes"))
		return -ENODEV;
	rtk = apple_rtkit_init(dev, dev, NULL, 0, &ane_glue_rtkit_ops);
	if (IS_ERR(rtk))
		return PTR_ERR(rtk);
	ret = apple_rtkit_boot(rtk);
	if (ret) {
		apple_rtkit_free(rtk);
		return ret;
	}
	*out = rtk;
	return 0;
#else
	return -EOPNOTSUPP;
#endif
}

/* Ends a session of ane_glue_rtkit_boot(). */
void ane_glue_rtkit_free(void *rtk)
{
#if IS_ENABLED(CONFIG_APPLE_RTKIT)
	apple_rtkit_free(rtk);
#endif
}

/* ---- fences and syncobjs ------------------------------------------------
 *
 * The kernel crates of 7.1-7.3 have no dma_fence or drm_syncobj
 * abstractions; these helpers are the few calls the driver makes
 * (ext/fence.rs wraps them). Policy (when a job's fence signals, with which
 * error) is Rust's.
 */

/*
 * A job's out-fence. The fence's lock lives in the same allocation, so it
 * lives exactly as long as the fence. The ops have no release and no wait
 * callback: the core then frees the fence with kfree_rcu (base is the first
 * member) and, from 7.2, detaches the ops when the fence signals, so a
 * signalled fence held by another driver or process does not point into
 * this module. Every fence is signalled before the device's unbind returns
 * (docs/architecture.md, "Fences").
 */
struct ane_glue_fence {
	struct dma_fence base;
	spinlock_t lock;
};

static const char *ane_glue_fence_driver_name(struct dma_fence *f)
{
	return "ane_accel";
}

static const char *ane_glue_fence_timeline_name(struct dma_fence *f)
{
	return "ane-job";
}

static const struct dma_fence_ops ane_glue_fence_ops = {
	.get_driver_name = ane_glue_fence_driver_name,
	.get_timeline_name = ane_glue_fence_timeline_name,
};

/*
 * A new unsignalled fence, with one reference for the caller, on a context
 * of its own: the scheduler reorders jobs (priority, fairness between
 * files), and fences of one context must signal in order.
 */
struct dma_fence *ane_glue_fence_new(void)
{
	struct ane_glue_fence *f = kzalloc(sizeof(*f), GFP_KERNEL);

	if (!f)
		return NULL;
	spin_lock_init(&f->lock);
	dma_fence_init(&f->base, &ane_glue_fence_ops, &f->lock,
		       dma_fence_context_alloc(1), 1);
	return &f->base;
}

/* Signals @f with @error (0 or a negative errno); a signalled fence is
 * left as it is. */
void ane_glue_fence_signal(struct dma_fence *f, int error)
{
	struct ane_glue_fence *af = container_of(f, struct ane_glue_fence, base);
	unsigned long flags;

	/* The lock given to dma_fence_init(), in every kernel (7.3 keeps it
	 * as extern_lock). */
	spin_lock_irqsave(&af->lock, flags);
	if (!test_bit(DMA_FENCE_FLAG_SIGNALED_BIT, &f->flags)) {
		if (error)
			dma_fence_set_error(f, error);
		dma_fence_signal_locked(f);
	}
	spin_unlock_irqrestore(&af->lock, flags);
}

/* Waits for @f (a fence of this driver), interruptibly, for at most
 * @timeout jiffies: >0 when it signalled, 0 when the time ran out,
 * -ERESTARTSYS on a signal. A fence signalled already returns at once
 * without sleeping: our fences have no ->signaled op, so the flag is the
 * whole truth (and dma_fence_is_signaled() would add RCU and lockdep
 * calls for nothing). */
long ane_glue_fence_wait(struct dma_fence *f, long timeout)
{
	if (test_bit(DMA_FENCE_FLAG_SIGNALED_BIT, &f->flags))
		return timeout ? timeout : 1;
	if (!timeout)
		return 0;
	return dma_fence_wait_timeout(f, true, timeout);
}

void ane_glue_fence_get(struct dma_fence *f)
{
	dma_fence_get(f);
}

void ane_glue_fence_put(struct dma_fence *f)
{
	dma_fence_put(f);
}

/*
 * The out-syncobj of an EXEC, looked up before the job is queued so that
 * attaching its fence cannot fail: -ENOENT for an unknown handle; with a
 * timeline @point, -EINVAL unless @point is above the timeline's last
 * point, and the chain node is allocated here.
 */
int ane_glue_syncobj_out_get(struct drm_file *file, u32 handle, u64 point,
			     struct drm_syncobj **out, struct dma_fence_chain **chain)
{
	struct drm_syncobj *s = drm_syncobj_find(file, handle);
	struct dma_fence *last;
	bool behind = false;

	*out = NULL;
	*chain = NULL;
	if (!s)
		return -ENOENT;
	if (point) {
		/* The timeline's last point (point 0: no walk down the chain);
		 * an empty syncobj has none. */
		if (!drm_syncobj_find_fence(file, handle, 0, 0, &last)) {
			if (to_dma_fence_chain(last) && last->seqno >= point)
				behind = true;
			dma_fence_put(last);
		}
		if (behind) {
			drm_syncobj_put(s);
			return -EINVAL;
		}
		*chain = dma_fence_chain_alloc();
		if (!*chain) {
			drm_syncobj_put(s);
			return -ENOMEM;
		}
	}
	*out = s;
	return 0;
}

/* Puts @f in the syncobj (a new timeline point with a chain node, else in
 * place of its fence) and drops the syncobj and chain. */
void ane_glue_syncobj_out_attach(struct drm_syncobj *s, struct dma_fence_chain *chain,
				 struct dma_fence *f, u64 point)
{
	if (chain)
		drm_syncobj_add_point(s, chain, f, point);
	else
		drm_syncobj_replace_fence(s, f);
	drm_syncobj_put(s);
}

/* Drops what ane_glue_syncobj_out_get() took, attaching nothing. */
void ane_glue_syncobj_out_drop(struct drm_syncobj *s, struct dma_fence_chain *chain)
{
	dma_fence_chain_free(chain);
	if (s)
		drm_syncobj_put(s);
}

/*
 * A job's in-fences. Each fence gets a callback; the last one to run (or,
 * at cancel, to be removed) queues @work, which calls @ready once. The
 * callbacks run in the signaller's atomic context: they only count down
 * and queue work. @error keeps the first in-fence error (or -ECANCELED
 * for a cancelled wait).
 */
struct ane_glue_dep {
	struct dma_fence_cb cb;
	struct dma_fence *fence;
	struct ane_glue_deps *deps;
	bool armed;
};

struct ane_glue_deps {
	atomic_t pending;
	atomic_t error;
	struct work_struct work;
	struct workqueue_struct *wq;
	void (*ready)(void *data, int error);
	void *data;
	unsigned int count, max;
	struct ane_glue_dep dep[];
};

struct ane_glue_deps *ane_glue_deps_new(unsigned int max)
{
	struct ane_glue_deps *d;

	d = kzalloc(struct_size_t(struct ane_glue_deps, dep, max), GFP_KERNEL);
	if (d)
		d->max = max;
	return d;
}

/* Adds the fence of syncobj @handle at @point: -ENOENT for an unknown
 * handle, -EINVAL for an empty syncobj or a point not submitted yet
 * (drm_syncobj_find_fence without WAIT_FOR_SUBMIT: EXEC never blocks). */
int ane_glue_deps_add(struct ane_glue_deps *d, struct drm_file *file, u32 handle,
		      u64 point)
{
	struct dma_fence *f = NULL;
	int ret;

	if (d->count >= d->max)
		return -E2BIG;
	ret = drm_syncobj_find_fence(file, handle, point, 0, &f);
	if (ret)
		return ret;
	d->dep[d->count].fence = f;
	d->dep[d->count].deps = d;
	d->count++;
	return 0;
}

static void ane_glue_deps_note(struct ane_glue_deps *d, int error)
{
	if (error)
		atomic_cmpxchg(&d->error, 0, error);
}

static void ane_glue_deps_work(struct work_struct *w)
{
	struct ane_glue_deps *d = container_of(w, struct ane_glue_deps, work);

	/* @d may be freed by @ready. */
	d->ready(d->data, atomic_read(&d->error));
}

static void ane_glue_deps_cb(struct dma_fence *f, struct dma_fence_cb *cb)
{
	struct ane_glue_dep *dep = container_of(cb, struct ane_glue_dep, cb);
	struct ane_glue_deps *d = dep->deps;

	ane_glue_deps_note(d, f->error);
	if (atomic_dec_and_test(&d->pending))
		queue_work(d->wq, &d->work);
}

/*
 * Waits for every fence added: returns 1 when all have signalled already
 * (@ready is then never called; *@error is the first fence error), else 0,
 * and @ready(@data, error) runs once from @wq after the last one signals
 * (or ane_glue_deps_cancel() removed the callbacks left).
 */
int ane_glue_deps_arm(struct ane_glue_deps *d, struct workqueue_struct *wq,
		      void (*ready)(void *data, int error), void *data, int *error)
{
	unsigned int i;

	INIT_WORK(&d->work, ane_glue_deps_work);
	d->wq = wq;
	d->ready = ready;
	d->data = data;
	atomic_set(&d->pending, 1);
	for (i = 0; i < d->count; i++) {
		struct ane_glue_dep *dep = &d->dep[i];

		atomic_inc(&d->pending);
		dep->armed = true;
		if (dma_fence_add_callback(dep->fence, &dep->cb, ane_glue_deps_cb)) {
			/* Signalled already. */
			dep->armed = false;
			ane_glue_deps_note(d, dep->fence->error);
			atomic_dec(&d->pending);
		}
	}
	*error = atomic_read(&d->error);
	if (atomic_dec_and_test(&d->pending))
		return 1;
	return 0;
}

/* Removes the callbacks that have not run: the wait ends with -ECANCELED
 * (queueing @ready if this removed the last). Only between a 0 from
 * ane_glue_deps_arm() and @ready. */
void ane_glue_deps_cancel(struct ane_glue_deps *d)
{
	unsigned int i;

	for (i = 0; i < d->count; i++) {
		struct ane_glue_dep *dep = &d->dep[i];

		if (!dep->armed || !dma_fence_remove_callback(dep->fence, &dep->cb))
			continue;
		ane_glue_deps_note(d, -ECANCELED);
		if (atomic_dec_and_test(&d->pending))
			queue_work(d->wq, &d->work);
	}
}

/* Drops the fences and frees @d (after @ready, or when never armed, or
 * when ane_glue_deps_arm() returned 1). */
void ane_glue_deps_free(struct ane_glue_deps *d)
{
	unsigned int i;

	if (!d)
		return;
	for (i = 0; i < d->count; i++)
		dma_fence_put(d->dep[i].fence);
	kfree(d);
}
