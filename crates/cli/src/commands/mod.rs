pub mod demo;
pub mod generate;
pub mod hw;
pub mod models;
pub mod sweep;
pub mod worker;

/// Parse a comma list: `64,256,1024`.
pub fn list<T: std::str::FromStr>(s: &str) -> Result<Vec<T>, String>
where
    T::Err: std::fmt::Display,
{
    s.split(',')
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .map(|p| p.parse::<T>().map_err(|e| format!("'{p}': {e}")))
        .collect()
}
