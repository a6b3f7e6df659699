//! How many compute threads the app's workers get when the user leaves it to the app.

/// The thread count beside a window that draws live, when the run asks for none (auto) and
/// this machine has no tuned profile for the backend (`lx tune`; its choice is used then):
/// all physical cores, less one when they are all the hardware threads this process may use.
/// A backend's threads wait for each other at every step, so a repaint that takes a slice of
/// one of their cores stalls all of them: with llama.cpp on both cores of a 2-core machine the app measured decode 8% slower
/// than headless `lx sweep`, with one core left for the window within 5% (scripts/app-bench;
/// docs/APP.md). Where there are spare hyper-threads the window runs on those and every
/// physical core still computes.
pub fn beside_a_window() -> usize {
    let logical = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
    leaving_a_core(lx_machine::hardware::physical_cores(), logical)
}

/// [`beside_a_window`] for a machine with `physical` cores and `logical` hardware threads.
fn leaving_a_core(physical: usize, logical: usize) -> usize {
    let physical = physical.max(1);
    if logical > physical {
        physical
    } else {
        logical.saturating_sub(1).max(1)
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_window_gets_a_core_of_its_own_unless_hyper_threads_are_spare() {
        use super::leaving_a_core as t;
        assert_eq!(t(2, 2), 1, "2-core VM: one computes, one draws");
        assert_eq!(t(8, 8), 7, "Apple M-series: no hyper-threads");
        assert_eq!(t(1, 1), 1, "never zero threads");
        assert_eq!(t(8, 16), 8, "SMT: the window runs on a sibling thread");
        assert_eq!(t(8, 4), 3, "affinity narrower than the physical cores");
        let here = super::beside_a_window();
        assert!(here >= 1 && here <= lx_machine::hardware::physical_cores(), "{here}");
    }
}
