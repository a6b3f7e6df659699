//! Whether a file is still the one that was read. A model file replaced, rewritten or
//! deleted while a run uses it must not go on being measured under the first file's name and
//! hash: a new worker would load whatever is there now.

use std::path::Path;
use std::time::SystemTime;

/// What identifies a file's contents without reading them again: its size, its modification
/// time and, on Unix, its device and inode (a file renamed over it is another inode).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileStamp {
    len: u64,
    modified: Option<SystemTime>,
    inode: Option<(u64, u64)>,
}

impl FileStamp {
    /// The stamp of `path` now.
    pub fn of(path: &Path) -> std::io::Result<FileStamp> {
        let meta = std::fs::metadata(path)?;
        #[cfg(unix)]
        let inode = {
            use std::os::unix::fs::MetadataExt;
            Some((meta.dev(), meta.ino()))
        };
        #[cfg(not(unix))]
        let inode = None;
        Ok(FileStamp { len: meta.len(), modified: meta.modified().ok(), inode })
    }

    /// `None` while `path` is still the stamped file; otherwise what happened to it.
    pub fn changed(&self, path: &Path) -> Option<String> {
        let now = match FileStamp::of(path) {
            Ok(now) => now,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Some("it was deleted or moved".into()),
            Err(e) => return Some(format!("it can no longer be read: {e}")),
        };
        if now.inode != self.inode {
            Some("another file was put in its place".into())
        } else if now.len != self.len {
            Some(format!("its size changed from {} to {} bytes", self.len, now.len))
        } else if now.modified != self.modified {
            Some("it was rewritten".into())
        } else {
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::FileStamp;

    #[test]
    fn a_file_is_the_same_until_it_is_rewritten_replaced_or_deleted() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("model.gguf");
        std::fs::write(&path, b"weights").unwrap();
        let stamp = FileStamp::of(&path).unwrap();
        assert_eq!(stamp.changed(&path), None);

        std::fs::write(&path, b"other weights").unwrap();
        assert_eq!(stamp.changed(&path).as_deref(), Some("its size changed from 7 to 13 bytes"));

        let stamp = FileStamp::of(&path).unwrap();
        let file = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
        file.set_modified(std::time::SystemTime::UNIX_EPOCH).unwrap();
        assert_eq!(stamp.changed(&path).as_deref(), Some("it was rewritten"), "same size, new time");

        let stamp = FileStamp::of(&path).unwrap();
        let other = dir.path().join("new.gguf");
        std::fs::write(&other, b"same size!!!!").unwrap();
        std::fs::rename(&other, &path).unwrap();
        #[cfg(unix)]
        assert_eq!(stamp.changed(&path).as_deref(), Some("another file was put in its place"));
        #[cfg(not(unix))]
        assert!(stamp.changed(&path).is_some());

        std::fs::remove_file(&path).unwrap();
        assert_eq!(stamp.changed(&path).as_deref(), Some("it was deleted or moved"));
    }
}
