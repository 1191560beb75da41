//! Storage endpoints: list, content, volume info and delete, upload (reference §6).

use serde_json::{Value, json};

use super::{ApiRequest, HandlerResult, done};
use crate::proxmox::nocloud::NoCloud;
use crate::proxmox::sim::error::PveError;
use crate::proxmox::sim::http::params::{Kind, opt, req};
use crate::proxmox::sim::profile::Work;
use crate::proxmox::sim::tasks::{Step, TaskSpec};
use crate::proxmox::sim::world::{Storage, World};

fn storage_on<'w>(w: &'w World, node: &str, id: &str) -> Result<&'w Storage, PveError> {
    w.storages
        .get(id)
        .filter(|s| s.on_node(node))
        .ok_or_else(|| PveError::internal(format!("storage '{id}' does not exist")))
}

/// `GET /nodes/{node}/storage`.
pub fn list(w: &mut World, r: &ApiRequest, node: &str) -> HandlerResult {
    r.params.check(
        &[
            opt("content", Kind::Str),
            opt("enabled", Kind::Bool),
            opt("storage", Kind::Str),
            opt("target", Kind::Node),
            opt("format", Kind::Bool),
        ],
        |_| false,
    )?;
    if let Some(id) = r.params.get("storage")
        && !w.storages.contains_key(id)
    {
        return Err(PveError::param("storage", "No such storage.").into());
    }
    let content: Vec<&str> = r
        .params
        .get("content")
        .map(|c| c.split(',').collect())
        .unwrap_or_default();
    let rows = w
        .storages
        .values()
        .filter(|s| s.on_node(node))
        .filter(|s| r.params.get("storage").is_none_or(|id| s.id == id))
        .filter(|s| content.iter().all(|c| s.supports(c)))
        .map(|s| w.storage_row(s, node))
        .collect();
    done(Value::Array(rows))
}

/// `GET /nodes/{node}/storage/{storage}/content`.
pub fn content(w: &mut World, r: &ApiRequest, node: &str, id: &str) -> HandlerResult {
    r.params.check(
        &[
            opt("content", Kind::Str),
            opt("vmid", Kind::Int(100, 999_999_999)),
        ],
        |_| false,
    )?;
    let s = storage_on(w, node, id)?;
    let vmid = r.params.int("vmid").and_then(|v| u32::try_from(v).ok());
    done(w.content_view(s, node, r.params.get("content"), vmid))
}

/// Resolves `volid` on the storage in the path.
fn lookup(
    w: &World,
    node: &str,
    id: &str,
    volid: &str,
) -> Result<(String, u64, String, Option<u32>), PveError> {
    let s = storage_on(w, node, id)?;
    let Some((sid, volname)) = volid.split_once(':') else {
        return Err(PveError::internal(format!(
            "unable to parse volume ID '{volid}'"
        )));
    };
    let missing = || {
        PveError::internal(format!(
            "volume_size_info on '{volid}' failed - volume '{volid}' does not exist"
        ))
    };
    if sid != s.id {
        return Err(missing());
    }
    let vol = s
        .volumes
        .get(&s.scope(node))
        .and_then(|v| v.get(volname))
        .ok_or_else(missing)?;
    Ok((s.path_of(volname), vol.size, vol.format.clone(), vol.vmid))
}

/// `GET .../content/{volid}`.
pub fn volume(w: &mut World, r: &ApiRequest, node: &str, id: &str, volid: &str) -> HandlerResult {
    r.params.check(&[], |_| false)?;
    let (path, size, format, _) = lookup(w, node, id, volid)?;
    done(json!({"path": path, "size": size, "used": size, "format": format}))
}

/// `DELETE .../content/{volid}`: an `imgdel` task.
pub fn delete_volume(
    w: &mut World,
    r: &ApiRequest,
    node: &str,
    id: &str,
    volid: &str,
) -> HandlerResult {
    r.params
        .check(&[opt("delay", Kind::Int(1, 30))], |_| false)?;
    let (_, _, _, owner) = lookup(w, node, id, volid)?;
    let scope = storage_on(w, node, id)?.scope(node);
    let task_id = owner
        .map(|v| format!("{v}@{id}"))
        .unwrap_or_else(|| id.to_string());
    let duration = w.duration(Work::ImgDel);
    let (storage, volname) = (
        id.to_string(),
        volid
            .split_once(':')
            .map(|(_, v)| v.to_string())
            .unwrap_or_default(),
    );
    let program = vec![
        Step::Sleep(duration),
        Step::run(move |w, ctx| {
            let removed = w
                .storages
                .get_mut(&storage)
                .and_then(|s| s.volumes.get_mut(&scope))
                .and_then(|v| v.remove(&volname));
            match removed {
                Some(_) => {
                    ctx.log(format!("Removed volume '{storage}:{volname}'"));
                    Ok(())
                }
                None => Err(format!("volume '{storage}:{volname}' does not exist")),
            }
        }),
    ];
    let upid = w.spawn_task(
        TaskSpec {
            node: node.to_string(),
            task_type: "imgdel",
            id: task_id,
            vmid: owner,
            program,
            on_failure: None,
        },
        false,
    );
    done(upid.to_string())
}

/// PVE's upload name rule: path stripped, characters outside `[A-Za-z0-9_.-]` → `_`.
pub fn normalize_filename(name: &str) -> String {
    let base = name.rsplit(['/', '\\']).next().unwrap_or(name);
    base.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-') {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// `POST .../upload` (multipart): an `imgcopy` task on the receiving node that stores
/// the image and, for ISOs, parses a NoCloud seed for the simulated guests.
pub fn upload(w: &mut World, r: &ApiRequest, node: &str, id: &str) -> HandlerResult {
    r.params.check(
        &[
            req("content", Kind::Enum(&["iso", "vztmpl", "import"])),
            opt("checksum", Kind::Str),
            opt(
                "checksum-algorithm",
                Kind::Enum(&["md5", "sha1", "sha224", "sha256", "sha384", "sha512"]),
            ),
            opt("tmpfilename", Kind::Str),
        ],
        |_| false,
    )?;
    let Some(file) = &r.upload else {
        return Err(
            PveError::param("filename", "property is missing and it is not optional").into(),
        );
    };
    let content = r.params.get("content").unwrap_or_default().to_string();
    let s = storage_on(w, node, id)?;
    if !s.is_file_based() {
        return Err(
            PveError::internal(format!("can't upload to storage type '{}'", s.kind)).into(),
        );
    }
    if !s.supports(&content) {
        return Err(PveError::internal(format!(
            "storage '{id}' does not support '{content}' content"
        ))
        .into());
    }
    let name = normalize_filename(&file.filename);
    let extension_ok = match content.as_str() {
        "iso" => name.ends_with(".iso") || name.ends_with(".img"),
        "vztmpl" => {
            name.ends_with(".tar.gz") || name.ends_with(".tar.xz") || name.ends_with(".tar.zst")
        }
        _ => true,
    };
    if !extension_ok {
        return Err(PveError::internal(format!("wrong file extension for '{name}'")).into());
    }
    if let Some(sum) = r.params.get("checksum")
        && r.params.get("checksum-algorithm") == Some("sha256")
        && !sum.eq_ignore_ascii_case(&crate::proxmox::sha256::hex(
            &crate::proxmox::sha256::digest(&file.data),
        ))
    {
        return Err(PveError::internal("checksum mismatch").into());
    }
    let scope = s.scope(node);
    let target = s.path_of(&format!("iso/{name}"));
    let data = file.data.clone();
    let (storage, volname) = (id.to_string(), format!("{content}/{name}"));
    let duration = w.duration(Work::ImgCopy);
    let receiving = node.to_string();
    let program = vec![
        Step::Sleep(duration),
        Step::run(move |w, ctx| {
            ctx.log("starting file import from the upload spool");
            ctx.log(format!("target node: {receiving}"));
            ctx.log(format!("target file: {target}"));
            ctx.log(format!("file size is: {}", data.len()));
            let existing = w
                .storages
                .get(&storage)
                .and_then(|s| s.volumes.get(&scope))
                .and_then(|v| v.get(&volname))
                .map(|v| v.size)
                .unwrap_or(0);
            w.check_space(
                &storage,
                &scope,
                (data.len() as u64).saturating_sub(existing),
            )
            .map_err(|e| format!("import failed: {e}"))?;
            w.add_volume(
                &storage,
                &scope,
                &volname,
                data.len() as u64,
                None,
                &content,
            );
            // Any ISO is a fine upload (real PVE ends `TASK OK`); only a cidata seed gives
            // the simulated guest a configuration, others leave it on DHCP.
            if content == "iso"
                && let Ok(seed) = NoCloud::from_iso(&data)
                && let Some(vol) = w
                    .storages
                    .get_mut(&storage)
                    .and_then(|s| s.volumes.get_mut(&scope))
                    .and_then(|v| v.get_mut(&volname))
            {
                vol.seed = Some(seed);
            }
            ctx.log("finished file import successfully");
            Ok(())
        }),
    ];
    let upid = w.spawn_task(
        TaskSpec {
            node: node.to_string(),
            task_type: "imgcopy",
            id: String::new(),
            vmid: None,
            program,
            on_failure: None,
        },
        false,
    );
    done(upid.to_string())
}

#[cfg(test)]
mod tests {
    use super::normalize_filename;

    #[test]
    fn filenames_are_normalized() {
        assert_eq!(
            normalize_filename("../../etc/user data-101.iso"),
            "user_data-101.iso"
        );
        assert_eq!(normalize_filename("C:\\x\\a.iso"), "a.iso");
    }
}
