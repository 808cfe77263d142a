/* SPDX-License-Identifier: GPL-2.0-only OR MIT */
/*
 * Prototypes of ane_glue.c. The Rust declarations are in ext/glue.rs, which
 * must match this file (both are checked by review; the types are plain
 * pointers and integers).
 */
#ifndef ANE_GLUE_H
#define ANE_GLUE_H

#include <linux/interrupt.h>
#include <linux/types.h>

struct device;
struct drm_file;
struct file_operations;
struct platform_device;
struct page;
struct sg_table;

/*
 * The driver's Rust callbacks (ext::platform). @probe returns 0 and the
 * device's data in @data, or a negative errno; @compatible is the matched
 * OF compatible, or NULL for a device bound by name (the test flavour's
 * simulated device). @release drops the data after @unbind (and, if the
 * device was left powered, @runtime_suspend). System sleep calls
 * @sleep_begin (stop starting jobs, let the running one end; an errno
 * refuses the sleep) before forcing runtime suspend, and @sleep_end after
 * forcing runtime resume. @shutdown runs at reboot, power-off and kexec
 * (the device stays bound): no device DMA may go on after it.
 */
struct ane_glue_ops {
	int (*probe)(struct platform_device *pdev, struct device *dev,
		     const char *compatible, void **data);
	void (*unbind)(struct platform_device *pdev, struct device *dev,
		       void *data);
	void (*release)(void *data);
	int (*runtime_suspend)(void *data);
	int (*runtime_resume)(void *data);
	int (*autosuspend_delay_ms)(void);
	int (*sleep_begin)(void *data);
	void (*sleep_end)(void *data);
	void (*shutdown)(void *data);
};

int ane_glue_register(const struct ane_glue_ops *ops);
void ane_glue_unregister(void);
void ane_glue_module_pin(void);
bool ane_glue_may_boost_priority(void);
void ane_glue_fdinfo_u64(void *p, const char *key, u64 val, const char *unit);
void ane_glue_fdinfo_memory(void *p, struct drm_file *file);
extern const struct file_operations ane_glue_accel_fops;

int ane_glue_request_firmware(struct device *dev, const char *name,
			      void **fw, const u8 **data, size_t *len);
void ane_glue_release_firmware(void *fw);

int ane_glue_ioremap(struct platform_device *pdev, const char *name,
		     size_t min_size, bool claim, void __iomem **out, u64 *phys);
u64 ane_glue_random_u64(void);
#ifdef ANE_TEST
void ane_glue_selftest_kasan(void);
#endif
u32 ane_glue_readl(const void __iomem *addr);
void ane_glue_writel(u32 val, void __iomem *addr);
u64 ane_glue_readq(const void __iomem *addr);
void ane_glue_writeq(u64 val, void __iomem *addr);

int ane_glue_dart_map(struct platform_device *pdev, unsigned int index,
		      size_t min_size, void __iomem **regs, int *irq);
void ane_glue_irq_disable(unsigned int irq);
void ane_glue_irq_enable(unsigned int irq);
void ane_glue_irq_disable_nosync(unsigned int irq);

int ane_glue_irq_get_optional(struct platform_device *pdev, unsigned int index);
int ane_glue_irq_request(unsigned int irq, irq_handler_t thread_fn,
			 const char *name, void *cookie);
void ane_glue_irq_free(unsigned int irq, void *cookie);
void ane_glue_irq_synchronize(unsigned int irq);

void ane_glue_pm_enable(struct device *dev, int delay_ms);
bool ane_glue_pm_disable(struct device *dev);
int ane_glue_pm_resume_and_get(struct device *dev);
void ane_glue_pm_put_autosuspend(struct device *dev);
int ane_glue_pm_domains_attach(struct device *dev);
int ane_glue_pm_cycle(struct device *dev);
void ane_glue_pm_get_noresume(struct device *dev);
void ane_glue_dma_mb(void);
struct page;
void ane_glue_page_read(struct page *page, size_t offset, void *dst, size_t len);
void ane_glue_page_write(struct page *page, size_t offset, const void *src, size_t len);
void ane_glue_page_copy(struct page *dst, size_t dst_off, struct page *src, size_t src_off,
			size_t len);
void *ane_glue_vmap_wc(struct page **pages, unsigned int count);
void ane_glue_vunmap(const void *addr);
void ane_glue_wc_copy(void *dst, const void *src, size_t len);
int ane_glue_clean_for_device(struct device *dev, struct sg_table *sgt);
void ane_glue_pages_copy(struct page **dst, size_t dst_off, struct page **src, size_t src_off,
			 size_t len);
void ane_glue_pages_write(struct page **dst, size_t dst_off, const void *src, size_t len);
void ane_glue_pages_read(void *dst, struct page **src, size_t src_off, size_t len);
void ane_glue_pages_zero(struct page **dst, size_t dst_off, size_t len);
struct drm_gem_object;
struct drm_device;
struct page **ane_glue_chunks_alloc(unsigned long count);
void ane_glue_chunks_free(struct page **pages, unsigned long count);
void ane_glue_gem_private_init(struct drm_device *dev, struct drm_gem_object *obj, size_t size);
void ane_glue_gem_private_release(struct drm_gem_object *obj);
void ane_glue_cond_resched(void);
/* Bytes the Rust side reserves for a struct sha256_ctx (ext/sha256.rs,
 * CTX_BYTES, 8-byte aligned); ane_glue.c checks it at build time. */
#define ANE_GLUE_SHA256_CTX_BYTES 128
void ane_glue_sha256_init(void *ctx);
void ane_glue_sha256_update(void *ctx, const u8 *data, size_t len);
void ane_glue_sha256_final(void *ctx, u8 *out);
void ane_glue_sha256(const u8 *data, size_t len, u8 *out);
struct ane_glue_boost;
struct ane_glue_boost *ane_glue_boost_new(unsigned int idle_ms);
void ane_glue_boost_begin(struct ane_glue_boost *b);
void ane_glue_boost_end(struct ane_glue_boost *b);
void ane_glue_boost_stop(struct ane_glue_boost *b);
void ane_glue_boost_free(struct ane_glue_boost *b);
struct workqueue_struct *ane_glue_wq_alloc(void);
void ane_glue_wq_destroy(struct workqueue_struct *wq);
int ane_glue_rtkit_boot(struct device *dev, void **out);
void ane_glue_rtkit_free(void *rtk);

struct dma_fence;
struct dma_fence_chain;
struct drm_syncobj;
struct workqueue_struct;
struct dma_fence *ane_glue_fence_new(void);
void ane_glue_fence_signal(struct dma_fence *f, int error);
long ane_glue_fence_wait(struct dma_fence *f, long timeout);
void ane_glue_fence_get(struct dma_fence *f);
void ane_glue_fence_put(struct dma_fence *f);
int ane_glue_syncobj_out_get(struct drm_file *file, u32 handle, u64 point,
			     struct drm_syncobj **out, struct dma_fence_chain **chain);
void ane_glue_syncobj_out_attach(struct drm_syncobj *s, struct dma_fence_chain *chain,
				 struct dma_fence *f, u64 point);
void ane_glue_syncobj_out_drop(struct drm_syncobj *s, struct dma_fence_chain *chain);
struct ane_glue_deps;
struct ane_glue_deps *ane_glue_deps_new(unsigned int max);
int ane_glue_deps_add(struct ane_glue_deps *d, struct drm_file *file, u32 handle,
		      u64 point);
int ane_glue_deps_arm(struct ane_glue_deps *d, struct workqueue_struct *wq,
		      void (*ready)(void *data, int error), void *data, int *error);
void ane_glue_deps_cancel(struct ane_glue_deps *d);
void ane_glue_deps_free(struct ane_glue_deps *d);

#endif
