// SPDX-License-Identifier: GPL-2.0-only OR MIT

//! The progress bar of long runs: drawn on stderr, only when stderr is a
//! terminal and JSON was not asked for.

use std::io::IsTerminal;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// Whether a progress bar should be drawn.
pub fn wanted(json: bool) -> bool {
    !json && std::io::stderr().is_terminal()
}

/// A progress bar, or nothing.
pub struct Progress(Option<ProgressBar>);

impl Progress {
    /// A bar of `len` steps labelled `message`, drawn when `enabled`.
    pub fn new(len: u64, message: &'static str, enabled: bool) -> Progress {
        if !enabled {
            return Progress(None);
        }
        let bar = ProgressBar::with_draw_target(Some(len), ProgressDrawTarget::stderr());
        if let Ok(style) = ProgressStyle::with_template(
            "{msg:>8} [{bar:40}] {pos}/{len} {elapsed_precise} (eta {eta})",
        ) {
            bar.set_style(style.progress_chars("=> "));
        }
        bar.set_message(message);
        Progress(Some(bar))
    }

    /// Relabels the bar and restarts it at 0 of `len`.
    pub fn restart(&self, len: u64, message: &'static str) {
        if let Some(b) = &self.0 {
            b.set_length(len);
            b.set_position(0);
            b.set_message(message);
        }
    }

    /// One step done.
    pub fn inc(&self) {
        if let Some(b) = &self.0 {
            b.inc(1);
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        if let Some(b) = &self.0 {
            b.finish_and_clear();
        }
    }
}
