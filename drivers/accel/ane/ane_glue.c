// SPDX-License-Identifier: GPL-2.0-only OR MIT
/*
 * Inline-only C helpers the Rust side cannot call directly: the runtime PM
 * API is mostly static inline wrappers in <linux/pm_runtime.h>. Each helper
 * is a plain call of one documented API sequence; policy lives in Rust
 * (ext/pm.rs is the only caller).
 */

#include <asm/barrier.h>
#include <linux/device.h>
#include <linux/of.h>
#include <linux/pm_domain.h>
#include <linux/pm_runtime.h>
#include <linux/soc/apple/rtkit.h>

#include "ane_glue.h"

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

void ane_glue_pm_put_autosuspend(struct device *dev)
{
	pm_runtime_mark_last_busy(dev);
	pm_runtime_put_autosuspend(dev);
}

/* System sleep: force runtime suspend/resume. */
int ane_glue_pm_force_suspend(struct device *dev)
{
	return pm_runtime_force_suspend(dev);
}

int ane_glue_pm_force_resume(struct device *dev)
{
	return pm_runtime_force_resume(dev);
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
	int ret;

	ret = devm_pm_domain_attach_list(dev, &data, &list);
	if (ret == -EEXIST)
		return 1;	/* one domain, attached by the bus */
	return ret;
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
