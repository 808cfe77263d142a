/* SPDX-License-Identifier: GPL-2.0-only OR MIT */
/* Prototypes of ane_glue.c; the Rust declarations are in ext/pm.rs. */
#ifndef ANE_GLUE_H
#define ANE_GLUE_H

#include <linux/types.h>

struct device;

void ane_glue_pm_enable(struct device *dev, int delay_ms);
bool ane_glue_pm_disable(struct device *dev);
int ane_glue_pm_resume_and_get(struct device *dev);
void ane_glue_pm_put_autosuspend(struct device *dev);
int ane_glue_pm_force_suspend(struct device *dev);
int ane_glue_pm_force_resume(struct device *dev);
int ane_glue_pm_domains_attach(struct device *dev);
void ane_glue_dma_mb(void);
void ane_glue_pm_get_noresume(struct device *dev);
int ane_glue_rtkit_boot(struct device *dev, void **out);
void ane_glue_rtkit_free(void *rtk);

#endif
