//! Files written whole or not at all: run files, profiles, caches and reports are replaced
//! by renaming a finished temporary file over them, so a crash or a reader never sees half.

use std::path::Path;

/// Replace `path` with `bytes` so that readers never see a partial file. The file gets the
/// permissions a plain create would give it (the umask's), or keeps those of the file it
/// replaces: a temporary file's owner-only mode must not leak into results people share.
pub fn write(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let dir = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).map_err(at("create", dir))?;
    let mut builder = tempfile::Builder::new();
    #[cfg(unix)]
    builder.permissions(std::os::unix::fs::PermissionsExt::from_mode(0o666));
    let mut tmp = builder.tempfile_in(dir).map_err(at("write in", dir))?;
    if let Ok(old) = std::fs::metadata(path) {
        let _ = tmp.as_file().set_permissions(old.permissions());
    }
    tmp.write_all(bytes).and_then(|()| tmp.as_file().sync_all()).map_err(at("write", path))?;
    tmp.persist(path).map_err(|e| e.error).map_err(at("write", path))?;
    Ok(())
}

/// The path in every message: "permission denied" alone does not say which file.
fn at<'a>(what: &'a str, path: &'a Path) -> impl Fn(std::io::Error) -> std::io::Error + 'a {
    move |e| std::io::Error::new(e.kind(), format!("cannot {what} {}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replaces_whole_files() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("run.json");
        write(&path, b"first").unwrap();
        write(&path, b"second").unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"second");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1, "temp file left behind");
    }

    #[cfg(unix)]
    #[test]
    fn gives_a_plain_file_s_permissions_and_keeps_a_chosen_one() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        let plain = dir.path().join("plain.json");
        std::fs::write(&plain, b"x").unwrap();
        let path = dir.path().join("run.json");
        write(&path, b"first").unwrap();
        assert_eq!(mode(&path), mode(&plain), "as std::fs::write would create it (the umask's mode)");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o640)).unwrap();
        write(&path, b"second").unwrap();
        assert_eq!(mode(&path), 0o640, "a replaced file keeps its mode");
    }
}
