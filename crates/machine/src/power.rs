//! Where the machine's power comes from and how it is asked to spend it: a laptop on battery
//! or in a quiet mode is a different machine for a benchmark, so a result says which it was.

use serde::{Deserialize, Serialize};

/// Power source and mode, as far as the system tells them.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Power {
    /// `mains`, or `battery` with its charge (`battery, 64%`); `None` where no supply is listed.
    pub source: Option<String>,
    /// The platform's power profile and the CPU frequency governor, where readable
    /// (`profile balanced, governor powersave`; macOS: `low power mode`).
    pub mode: Option<String>,
    /// What could not be read, and why.
    pub unread: Vec<String>,
}

/// Read this machine's power source and mode.
pub fn read() -> Power {
    #[cfg(target_os = "linux")]
    {
        linux()
    }
    #[cfg(target_os = "macos")]
    {
        macos()
    }
    #[cfg(not(any(target_os = "linux", target_os = "macos")))]
    {
        Power { unread: vec!["power source and mode: not read on this system".into()], ..Power::default() }
    }
}

#[cfg(target_os = "linux")]
fn linux() -> Power {
    let text = |p: std::path::PathBuf| std::fs::read_to_string(p).ok().map(|s| s.trim().to_string());
    let mut supplies = Vec::new();
    if let Ok(entries) = std::fs::read_dir("/sys/class/power_supply") {
        for e in entries.flatten() {
            let dir = e.path();
            supplies.push(Supply { kind: text(dir.join("type")).unwrap_or_default(), online: text(dir.join("online")), status: text(dir.join("status")), capacity: text(dir.join("capacity")) });
        }
    }
    let profile = text("/sys/firmware/acpi/platform_profile".into());
    let governor = text("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor".into());
    from_linux_files(&supplies, profile.as_deref(), governor.as_deref())
}

/// One entry of `/sys/class/power_supply`.
#[derive(Debug, Clone, Default)]
struct Supply {
    /// `Mains`, `Battery`, `USB`...
    kind: String,
    online: Option<String>,
    status: Option<String>,
    capacity: Option<String>,
}

/// The figures from what Linux's files said (separate from reading them, so it is tested).
fn from_linux_files(supplies: &[Supply], profile: Option<&str>, governor: Option<&str>) -> Power {
    let mut power = Power::default();
    let mains_online = supplies.iter().any(|s| matches!(s.kind.as_str(), "Mains" | "USB") && s.online.as_deref() == Some("1"));
    let battery = supplies.iter().find(|s| s.kind == "Battery");
    power.source = match battery {
        _ if mains_online => Some("mains".into()),
        Some(b) if b.status.as_deref() == Some("Discharging") => Some(match &b.capacity {
            Some(c) => format!("battery, {c}%"),
            None => "battery".into(),
        }),
        Some(_) => Some("mains".into()),
        None => None,
    };
    if power.source.is_none() {
        power.unread.push("power source: no power supply listed (a desktop, server or virtual machine)".into());
    }
    let mode: Vec<String> = [profile.map(|p| format!("profile {p}")), governor.map(|g| format!("governor {g}"))].into_iter().flatten().collect();
    power.mode = (!mode.is_empty()).then(|| mode.join(", "));
    if power.mode.is_none() {
        power.unread.push("power mode: neither a platform profile nor a CPU frequency governor is exposed".into());
    }
    power
}

#[cfg(target_os = "macos")]
fn macos() -> Power {
    let mut power = Power::default();
    match std::process::Command::new("pmset").args(["-g", "batt"]).output() {
        Ok(o) if o.status.success() => {
            let text = String::from_utf8_lossy(&o.stdout);
            power.source = Some(if text.contains("'AC Power'") { "mains".into() } else { "battery".into() });
        }
        _ => power.unread.push("power source: pmset did not answer".into()),
    }
    match std::process::Command::new("pmset").args(["-g"]).output() {
        Ok(o) if o.status.success() => {
            let text = String::from_utf8_lossy(&o.stdout);
            let low = text.lines().any(|l| l.split_whitespace().collect::<Vec<_>>() == ["lowpowermode", "1"]);
            power.mode = Some(if low { "low power mode".into() } else { "normal".into() });
        }
        _ => power.unread.push("power mode: pmset did not answer".into()),
    }
    power
}

#[cfg(test)]
mod tests {
    use super::*;

    fn supply(kind: &str, online: Option<&str>, status: Option<&str>, capacity: Option<&str>) -> Supply {
        Supply { kind: kind.into(), online: online.map(Into::into), status: status.map(Into::into), capacity: capacity.map(Into::into) }
    }

    #[test]
    fn a_laptop_says_mains_or_battery_and_its_mode() {
        let on_battery = [supply("Mains", Some("0"), None, None), supply("Battery", None, Some("Discharging"), Some("64"))];
        let p = from_linux_files(&on_battery, Some("low-power"), Some("powersave"));
        assert_eq!(p.source.as_deref(), Some("battery, 64%"));
        assert_eq!(p.mode.as_deref(), Some("profile low-power, governor powersave"));
        assert!(p.unread.is_empty());
        let plugged = [supply("Mains", Some("1"), None, None), supply("Battery", None, Some("Charging"), Some("80"))];
        assert_eq!(from_linux_files(&plugged, None, Some("performance")).source.as_deref(), Some("mains"));
    }

    #[test]
    fn a_machine_without_supplies_says_what_it_could_not_read() {
        let p = from_linux_files(&[], None, None);
        assert_eq!((p.source, p.mode), (None, None));
        assert_eq!(p.unread.len(), 2, "{:?}", p.unread);
        assert!(p.unread[0].starts_with("power source:"));
        // This machine, whatever it is, reads as one of the two.
        let here = read();
        assert!(here.source.is_some() || here.unread.iter().any(|u| u.starts_with("power source")));
    }
}
