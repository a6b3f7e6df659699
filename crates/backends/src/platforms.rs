//! The platform status table of docs/PLATFORMS.md (which CI job or measurement proves each
//! backend on each platform), compiled in from the document itself so that `lx hw` and the
//! app make exactly the claims the docs make, and show the rows for this machine.

const DOC: &str = include_str!("../../../docs/PLATFORMS.md");

/// One row of the table; cells as written, without Markdown code marks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlatformStatus {
    pub backend: String,
    pub platform: String,
    pub device: String,
    pub built_in_ci: String,
    pub tested_in_ci: String,
    pub measured: String,
}

/// Every row of the table.
pub fn all() -> Vec<PlatformStatus> {
    let Some(section) = DOC.split("\n## Platform status").nth(1) else { return Vec::new() };
    section
        .lines()
        .skip_while(|l| !l.starts_with("| backend |"))
        .skip(2) // the header and its separator
        .take_while(|l| l.starts_with('|'))
        .filter_map(|l| {
            let cells: Vec<String> = l.trim().trim_matches('|').split(" | ").map(|c| c.trim().replace('`', "")).collect();
            let [backend, platform, device, built_in_ci, tested_in_ci, measured] = <[String; 6]>::try_from(cells).ok()?;
            Some(PlatformStatus { backend, platform, device, built_in_ci, tested_in_ci, measured })
        })
        .collect()
}

/// The rows that apply to this machine's OS and architecture.
pub fn here() -> Vec<PlatformStatus> {
    all().into_iter().filter(|r| applies(&r.platform, std::env::consts::OS, std::env::consts::ARCH)).collect()
}

/// Whether a platform cell ("Linux x86_64", "Linux / Windows", "macOS arm64", "any") covers
/// this OS and architecture.
fn applies(platform: &str, os: &str, arch: &str) -> bool {
    if platform == "any" {
        return true;
    }
    let os_name = match os {
        "linux" => "Linux",
        "windows" => "Windows",
        "macos" => "macOS",
        other => other,
    };
    let arch_name = match arch {
        "aarch64" => "arm64",
        other => other,
    };
    let names_an_arch = platform.contains("x86_64") || platform.contains("arm64");
    platform.contains(os_name) && (!names_an_arch || platform.contains(arch_name))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_documented_table_is_read_whole() {
        let rows = all();
        assert!(rows.len() >= 10, "{rows:?}");
        for backend in ["llama.cpp", "candle", "MLX", "desktop app"] {
            assert!(rows.iter().any(|r| r.backend == backend), "no row for {backend}");
        }
        let linux_cpu = rows.iter().find(|r| r.backend == "llama.cpp" && r.platform == "Linux x86_64").expect("llama.cpp on Linux");
        assert_eq!(linux_cpu.device, "CPU");
        assert!(linux_cpu.built_in_ci.contains("linux"), "{linux_cpu:?}");
        assert!(rows.iter().all(|r| !r.measured.is_empty() && !r.backend.contains('`')));
    }

    #[test]
    fn rows_apply_to_their_platforms() {
        assert!(applies("Linux x86_64", "linux", "x86_64"));
        assert!(!applies("Linux x86_64", "linux", "aarch64"));
        assert!(applies("Linux / Windows", "windows", "x86_64"));
        assert!(applies("macOS arm64", "macos", "aarch64"));
        assert!(!applies("macOS arm64", "linux", "x86_64"));
        assert!(applies("Linux, Windows", "linux", "aarch64"));
        assert!(applies("any", "macos", "aarch64"));
        if cfg!(all(target_os = "linux", target_arch = "x86_64")) {
            assert!(here().iter().any(|r| r.backend == "llama.cpp" && r.device == "CPU"));
            assert!(here().iter().all(|r| r.platform != "macOS arm64"));
        }
    }
}
