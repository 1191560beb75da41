//! `convert` (also the clusterctl plugin `clusterctl capmox-convert`): manifests — files,
//! directories, standard input; YAML documents or JSON, Lists included — with every
//! Proxmox object converted to the requested version by the server's own conversion
//! (`api::manifest`). Every other document is written back as it was, byte for byte, and so
//! is a Proxmox object already in that version. Given the stored objects (`--context`), a
//! v1alpha1 object converts up without losing what only v1alpha2 holds. clusterctl
//! templates convert too: envsubst expressions keep their places (`placeholders`).
//!
//! Nothing is written unless every document converts: an error names the file, the
//! document and the object.

mod documents;
mod placeholders;
mod yaml;

use std::collections::{BTreeSet, HashMap};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use anyhow::{Context as _, bail};
use serde_json::Value;

use crate::api::{GROUP, Kind, Version, manifest, schema};
use placeholders::Placeholders;

/// What to convert, to which version, and where the result goes.
#[derive(Debug, Clone)]
pub struct ConvertOptions {
    /// Files and directories; empty (or `-`) reads standard input.
    pub inputs: Vec<PathBuf>,
    /// Whether directories are read with their subdirectories.
    pub recursive: bool,
    /// The version every Proxmox object ends up in.
    pub to: Version,
    /// Files of stored objects (v1alpha2), the context of an up-conversion.
    pub context: Vec<PathBuf>,
    /// Rewrite the files in place, keeping the originals under this suffix if not empty.
    pub in_place: Option<String>,
}

/// Runs the conversion: the result on `out` (unless in place), warnings on `err`.
pub fn run(
    options: &ConvertOptions,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> anyhow::Result<()> {
    let context = StoredObjects::load(&options.context)?;
    let inputs = expand_inputs(&options.inputs, options.recursive)?;
    if options.in_place.is_some() && inputs.iter().any(|i| i.is_none()) {
        bail!("--in-place needs files (-f), not standard input");
    }
    let mut converted = Vec::with_capacity(inputs.len());
    for input in &inputs {
        let (name, text) = read_input(input.as_deref())?;
        let mut converter = Converter {
            to: options.to,
            context: &context,
            warnings: Vec::new(),
            typed_expressions: BTreeSet::new(),
        };
        let result = converter.text(&text).with_context(|| name.clone())?;
        for warning in &converter.warnings {
            writeln!(err, "warning: {name}: {warning}")?;
        }
        converted.push((input, text, result));
    }
    match &options.in_place {
        Some(suffix) => {
            for (input, original, result) in converted {
                let path = input.as_deref().expect("checked: files only");
                if result != original {
                    write_in_place(path, &original, &result, suffix)?;
                }
            }
        }
        None => {
            for (index, (_, _, result)) in converted.iter().enumerate() {
                if index > 0 && !result.starts_with("---") {
                    out.write_all(b"---\n")?;
                }
                out.write_all(result.as_bytes())?;
                if !result.is_empty() && !result.ends_with('\n') {
                    out.write_all(b"\n")?;
                }
            }
        }
    }
    Ok(())
}

/// Converts the documents of one file.
struct Converter<'a> {
    to: Version,
    context: &'a StoredObjects,
    warnings: Vec<String>,
    /// The expressions that stand for numbers or lists (written unquoted).
    typed_expressions: BTreeSet<String>,
}

impl Converter<'_> {
    /// The file's text with its Proxmox objects converted.
    fn text(&mut self, text: &str) -> anyhow::Result<String> {
        if text.trim_start().starts_with(['{', '[']) {
            let value: Value = serde_json::from_str(text).context("not valid JSON")?;
            return Ok(match self.value(value)? {
                Some(value) => serde_json::to_string_pretty(&value)? + "\n",
                None => text.to_owned(),
            });
        }
        let mut result = String::with_capacity(text.len());
        for (index, document) in documents::split(text).into_iter().enumerate() {
            result.push_str(document.separator);
            let parsed = placeholders::parse_document(document.body)
                .with_context(|| format!("document {}: not valid YAML", index + 1))?;
            let converted = self
                .value(parsed.value)
                .with_context(|| format!("document {}", index + 1))?;
            match converted {
                None => result.push_str(document.body),
                Some(_) if parsed.needs_substitution => bail!(
                    "document {}: its text is YAML only once its ${{…}} expressions are \
                     substituted (an expression spliced into a {{flow map}}); substitute them \
                     first (clusterctl generate yaml)",
                    index + 1
                ),
                Some(value) => {
                    if documents::has_comments(document.body) {
                        self.warnings.push(format!(
                            "document {}: its comments are not kept in the converted object",
                            index + 1
                        ));
                    }
                    let expressions = yaml::Expressions {
                        plain: &self.typed_expressions,
                        spliced: &parsed.spliced,
                    };
                    result.push_str(&yaml::to_string(&value, &expressions)?);
                }
            }
        }
        Ok(result)
    }

    /// The document converted, or `None` if it holds no Proxmox object to convert.
    fn value(&mut self, mut value: Value) -> anyhow::Result<Option<Value>> {
        if served_kind(&value).is_some() {
            return self.object(value);
        }
        let Some(Value::Array(items)) = value.get_mut("items") else {
            return Ok(None);
        };
        let mut changed = false;
        for item in items.iter_mut() {
            if served_kind(item).is_some()
                && let Some(converted) = self.object(item.take())?
            {
                *item = converted;
                changed = true;
            }
        }
        // A list of our group (`ProxmoxMachineList`) is in the version of its items.
        let own_list = value["apiVersion"]
            .as_str()
            .is_some_and(|v| v.starts_with(&format!("{GROUP}/")));
        if changed && own_list {
            value["apiVersion"] = self.to.api_version().into();
        }
        Ok(changed.then_some(value))
    }

    /// One Proxmox object converted, or `None` if it is in the requested version already.
    fn object(&mut self, mut object: Value) -> anyhow::Result<Option<Value>> {
        let kind = served_kind(&object).expect("checked by the caller");
        let what = describe(&object);
        let api_version = object["apiVersion"].as_str().unwrap_or_default();
        let from = Version::from_api_version(api_version)
            .with_context(|| format!("{what}: version {api_version} is not served"))?;
        if from == self.to {
            return Ok(None);
        }
        if !kind.descriptor().serves(from) {
            bail!("{what}: {kind} is not served in {from}");
        }
        // A kind new in v1alpha2 stays in it: the rest of the manifest still converts, and
        // the server reads the object as it is.
        if !kind.descriptor().serves(self.to) {
            self.warnings.push(format!(
                "{what}: {kind} is not served in {}: left in {from}",
                self.to
            ));
            return Ok(None);
        }
        let had_status = object.get("status").is_some();
        let stored = self.context.find(kind, &object, &mut self.warnings);
        let placeholders = Placeholders::hide(&mut object, schema::structural(from, kind))
            .with_context(|| what.clone())?;
        let converted =
            manifest::convert(kind, from, object, self.to, stored).with_context(|| what.clone())?;
        let mut result = converted.object;
        placeholders
            .restore(&mut result)
            .with_context(|| what.clone())?;
        self.typed_expressions
            .extend(placeholders.expressions().map(str::to_owned));
        // A manifest without status stays one: v1alpha1 shows an empty status
        // (`ready: false`), which a manifest has no use for.
        if !had_status && let Value::Object(map) = &mut result {
            map.remove("status");
        }
        self.warnings.extend(
            converted
                .warnings
                .into_iter()
                .map(|warning| format!("{what}: {warning}")),
        );
        Ok(Some(result))
    }
}

/// The served kind of an object of our group (other kinds of the group, another provider's,
/// are not ours to convert).
fn served_kind(object: &Value) -> Option<Kind> {
    let (group, _) = object["apiVersion"].as_str()?.split_once('/')?;
    (group == GROUP).then_some(())?;
    Kind::from_name(object["kind"].as_str()?)
}

/// `ProxmoxMachine ns/name` (or `ProxmoxMachine name` without a namespace), for messages.
fn describe(object: &Value) -> String {
    let meta = &object["metadata"];
    let name = meta["name"].as_str().unwrap_or("<no name>");
    match meta["namespace"].as_str() {
        Some(namespace) => format!(
            "{} {namespace}/{name}",
            object["kind"].as_str().unwrap_or("?")
        ),
        None => format!("{} {name}", object["kind"].as_str().unwrap_or("?")),
    }
}

/// The stored objects given as context, by kind, namespace and name.
#[derive(Default)]
struct StoredObjects {
    objects: HashMap<(Kind, String, String), Value>,
}

impl StoredObjects {
    fn load(files: &[PathBuf]) -> anyhow::Result<Self> {
        let mut stored = StoredObjects::default();
        for file in files {
            let (name, text) = read_input(Some(file))?;
            let documents: Vec<Value> = serde_saphyr::from_multiple(&text)
                .with_context(|| format!("--context {name}: neither JSON nor YAML documents"))?;
            for object in documents.into_iter().flat_map(list_items) {
                let Some(kind) = served_kind(&object) else {
                    continue;
                };
                if object["apiVersion"] != Version::V1alpha2.api_version() {
                    bail!(
                        "--context {name}: {} is in {}; the context is the objects as stored, \
                         in {} (kubectl get -o yaml shows them so)",
                        describe(&object),
                        object["apiVersion"].as_str().unwrap_or_default(),
                        Version::V1alpha2
                    );
                }
                stored.objects.insert(key(kind, &object), object);
            }
        }
        Ok(stored)
    }

    /// The stored object `object` is a version of: same kind, namespace and name, and the
    /// same uid where both have one.
    fn find(&self, kind: Kind, object: &Value, warnings: &mut Vec<String>) -> Option<&Value> {
        let stored = self.objects.get(&key(kind, object))?;
        let uid = |o: &Value| o["metadata"]["uid"].as_str().map(str::to_owned);
        if let (Some(theirs), Some(ours)) = (uid(stored), uid(object))
            && theirs != ours
        {
            warnings.push(format!(
                "{}: the context holds an object of this name with another uid; not used",
                describe(object)
            ));
            return None;
        }
        Some(stored)
    }
}

fn key(kind: Kind, object: &Value) -> (Kind, String, String) {
    let meta = &object["metadata"];
    let text = |v: &Value, default: &str| v.as_str().unwrap_or(default).to_owned();
    (
        kind,
        text(&meta["namespace"], "default"),
        text(&meta["name"], ""),
    )
}

/// The objects of a document: a List's items, or the document itself.
fn list_items(document: Value) -> Vec<Value> {
    match document {
        Value::Null => Vec::new(),
        Value::Object(mut map) => match map.remove("items") {
            Some(Value::Array(items)) => items,
            Some(other) => {
                map.insert("items".into(), other);
                vec![Value::Object(map)]
            }
            None => vec![Value::Object(map)],
        },
        other => vec![other],
    }
}

/// The files to read: each file as given, each directory's manifests (`.yaml`, `.yml`,
/// `.json`, by name; with `recursive`, its subdirectories' too). `None` is standard input.
fn expand_inputs(inputs: &[PathBuf], recursive: bool) -> anyhow::Result<Vec<Option<PathBuf>>> {
    if inputs.is_empty() {
        return Ok(vec![None]);
    }
    let mut files = Vec::new();
    for input in inputs {
        if input == Path::new("-") {
            files.push(None);
        } else if input.is_dir() {
            collect_directory(input, recursive, &mut files)?;
        } else {
            files.push(Some(input.clone()));
        }
    }
    Ok(files)
}

fn collect_directory(
    dir: &Path,
    recursive: bool,
    files: &mut Vec<Option<PathBuf>>,
) -> anyhow::Result<()> {
    let mut entries = std::fs::read_dir(dir)
        .with_context(|| format!("reading {}", dir.display()))?
        .map(|entry| entry.map(|e| e.path()))
        .collect::<Result<Vec<_>, _>>()?;
    entries.sort();
    for path in entries {
        if path.is_dir() {
            if recursive {
                collect_directory(&path, recursive, files)?;
            }
        } else if path
            .extension()
            .is_some_and(|e| e == "yaml" || e == "yml" || e == "json")
        {
            files.push(Some(path));
        }
    }
    Ok(())
}

/// The name (for messages) and text of a file, or of standard input.
fn read_input(path: Option<&Path>) -> anyhow::Result<(String, String)> {
    match path {
        None => {
            let mut text = String::new();
            std::io::stdin()
                .read_to_string(&mut text)
                .context("reading standard input")?;
            Ok(("<stdin>".to_owned(), text))
        }
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("reading {}", path.display()))?;
            Ok((path.display().to_string(), text))
        }
    }
}

/// Replaces a file's content (through a file beside it and a rename, so that a crash
/// leaves the old or the new file, never half of one), keeping the original under
/// `suffix` if one is given.
fn write_in_place(
    path: &Path,
    original: &str,
    converted: &str,
    suffix: &str,
) -> anyhow::Result<()> {
    let sibling = |tail: &str| {
        let mut name = path.as_os_str().to_owned();
        name.push(tail);
        PathBuf::from(name)
    };
    if !suffix.is_empty() {
        std::fs::write(sibling(suffix), original)
            .with_context(|| format!("writing the backup of {}", path.display()))?;
    }
    let temporary = sibling(".capmox-convert.tmp");
    std::fs::write(&temporary, converted)
        .with_context(|| format!("writing {}", temporary.display()))?;
    if let Ok(metadata) = std::fs::metadata(path) {
        std::fs::set_permissions(&temporary, metadata.permissions())?;
    }
    std::fs::rename(&temporary, path).with_context(|| format!("replacing {}", path.display()))
}
