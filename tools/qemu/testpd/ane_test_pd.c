// SPDX-License-Identifier: GPL-2.0-only OR MIT
/*
 * Test fixture, never shipped: generic power domains for the QEMU device
 * tree, so the ane driver's multi-domain genpd attach and runtime PM run
 * against real genpd providers on arm64 QEMU (which has no Apple PMGR).
 *
 * One platform device ("ane-test,pmgr") holds one child node per domain,
 * parents before children, like the Apple PMGR. Each child becomes a genpd
 * (#power-domain-cells = <0>), a subdomain of the domain its own
 * "power-domains" names. Every power transition is logged as
 *   ane_test_pd: <name> on|off
 * so a test can check which domains came up, in which order, and that they
 * go down again when the consumer runtime-suspends.
 */

#include <linux/module.h>
#include <linux/of.h>
#include <linux/platform_device.h>
#include <linux/pm_domain.h>
#include <linux/slab.h>

struct ane_test_pd {
	struct generic_pm_domain genpd;
	struct device_node *np;
};

static int ane_test_pd_on(struct generic_pm_domain *genpd)
{
	pr_info("ane_test_pd: %s on\n", genpd->name);
	return 0;
}

static int ane_test_pd_off(struct generic_pm_domain *genpd)
{
	pr_info("ane_test_pd: %s off\n", genpd->name);
	return 0;
}

static void ane_test_pd_remove_all(struct device_node *parent)
{
	struct device_node *np;

	for_each_child_of_node(parent, np)
		of_genpd_del_provider(np);
}

static int ane_test_pd_probe(struct platform_device *pdev)
{
	struct device *dev = &pdev->dev;
	struct device_node *np;
	int ret;

	for_each_child_of_node(dev->of_node, np) {
		struct of_phandle_args parent, child;
		struct ane_test_pd *pd;

		pd = devm_kzalloc(dev, sizeof(*pd), GFP_KERNEL);
		if (!pd) {
			ret = -ENOMEM;
			goto err;
		}
		pd->np = np;
		pd->genpd.name = devm_kasprintf(dev, GFP_KERNEL, "%pOFn", np);
		pd->genpd.power_on = ane_test_pd_on;
		pd->genpd.power_off = ane_test_pd_off;
		ret = pm_genpd_init(&pd->genpd, NULL, true);
		if (ret)
			goto err;
		ret = of_genpd_add_provider_simple(np, &pd->genpd);
		if (ret)
			goto err;
		if (of_parse_phandle_with_args(np, "power-domains",
					       "#power-domain-cells", 0,
					       &parent) == 0) {
			child.np = np;
			child.args_count = 0;
			ret = of_genpd_add_subdomain(&parent, &child);
			of_node_put(parent.np);
			if (ret)
				goto err;
		}
	}
	return 0;
err:
	of_node_put(np);
	ane_test_pd_remove_all(dev->of_node);
	return dev_err_probe(dev, ret, "cannot register the test domains\n");
}

static const struct of_device_id ane_test_pd_of_match[] = {
	{ .compatible = "ane-test,pmgr" },
	{}
};
MODULE_DEVICE_TABLE(of, ane_test_pd_of_match);

static struct platform_driver ane_test_pd_driver = {
	.probe = ane_test_pd_probe,
	.driver = {
		.name = "ane-test-pd",
		.of_match_table = ane_test_pd_of_match,
		/* Domains cannot go away under their consumers. */
		.suppress_bind_attrs = true,
	},
};
builtin_platform_driver(ane_test_pd_driver);

MODULE_DESCRIPTION("Test-only power domains for the ane driver's QEMU tests");
MODULE_LICENSE("Dual MIT/GPL");
