// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! The simulator's debugfs directory (the test-flavour module's
//! `ane-sim`), shared by the test binary and the benchmark.

/// Where the simulator's knobs and counters are.
pub const SIM_DEBUGFS: &str = "/sys/kernel/debug/ane-sim";

/// A read-only counter of the simulator.
pub fn sim_counter(name: &str) -> Result<u64, String> {
    let s = std::fs::read_to_string(format!("{SIM_DEBUGFS}/{name}")).map_err(|e| e.to_string())?;
    s.trim().parse::<u64>().map_err(|e| e.to_string())
}
