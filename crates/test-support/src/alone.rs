//! A test run in a process of its own: this test binary, started again for that one test.
//!
//! MLX's evaluation is not meant to be driven from several threads of one process, and its
//! Linux build computes on one core. Tests that each hold MLX for a minute or more run one at
//! a time in one process, leaving the other core idle; each in a process of its own, libtest's
//! two threads run two at once, a core each.

use std::process::Command;

/// Set in the started process: the test's body runs there.
const CHILD: &str = "LX_TEST_IN_OWN_PROCESS";

/// Runs `body` in a process of its own: this binary asked for the test named `test` alone
/// (its name as libtest gives it, `--exact`). There, `body` runs; here, the test passes when
/// that process passes, and its output is this test's output (shown on failure, or with
/// `--nocapture`).
pub fn in_own_process(test: &str, body: impl FnOnce()) {
    if std::env::var_os(CHILD).is_some() {
        return body();
    }
    let exe = std::env::current_exe().expect("the test binary's path");
    let out = Command::new(&exe)
        .args([test, "--exact", "--test-threads", "1", "--nocapture"])
        .env(CHILD, "1")
        // The test's time is recorded here, where it waited for its turn (tests/src.rs).
        .env_remove("LX_TEST_TIMES")
        .output()
        .unwrap_or_else(|e| panic!("starting {} for {test}: {e}", exe.display()));
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    // The started harness names the test it ran: a misspelt name runs nothing, and passes.
    assert!(stdout.contains(&format!("test {test} ... ")), "{test}: no test of that name ran in its own process:\n{stdout}{stderr}");
    assert!(out.status.success(), "{test}, in its own process, failed ({}):\n{stdout}{stderr}", out.status);
    eprint!("{stderr}");
}
