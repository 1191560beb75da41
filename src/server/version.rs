//! `/version` in kube's `version.Info` shape, describing this server.

use axum::Json;
use serde::Serialize;

/// kube's `version.Info` (every field is a string; clients such as the Python client require
/// all of them to be present).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct VersionInfo {
    pub major: String,
    pub minor: String,
    pub git_version: String,
    pub git_commit: String,
    pub git_tree_state: String,
    pub build_date: String,
    pub go_version: String,
    pub compiler: String,
    pub platform: String,
}

impl VersionInfo {
    /// This build's version.
    pub fn current() -> Self {
        let version = env!("CARGO_PKG_VERSION");
        let mut parts = version.split('.');
        let major = parts.next().unwrap_or("0").to_owned();
        let minor = parts.next().unwrap_or("0").to_owned();
        Self {
            major,
            minor,
            git_version: format!("v{version}"),
            git_commit: option_env!("CAPMOX_GIT_COMMIT").unwrap_or("").to_owned(),
            git_tree_state: option_env!("CAPMOX_GIT_TREE_STATE")
                .unwrap_or("")
                .to_owned(),
            build_date: option_env!("CAPMOX_BUILD_DATE").unwrap_or("").to_owned(),
            go_version: "n/a (Rust)".to_owned(),
            compiler: "rustc".to_owned(),
            platform: format!("{}/{}", std::env::consts::OS, go_arch()),
        }
    }
}

/// Architecture names as Go spells them (kubectl and tooling expect `amd64`, `arm64`).
fn go_arch() -> &'static str {
    match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        "x86" => "386",
        other => other,
    }
}

/// `GET /version`.
pub async fn handler() -> Json<VersionInfo> {
    Json(VersionInfo::current())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_fields() {
        let v = VersionInfo::current();
        assert_eq!(v.git_version, format!("v{}", env!("CARGO_PKG_VERSION")));
        assert_eq!(
            format!("{}.{}", v.major, v.minor),
            env!("CARGO_PKG_VERSION")
                .rsplit_once('.')
                .map(|(a, _)| a)
                .unwrap_or_default()
        );
        let json = serde_json::to_value(&v).expect("json");
        for key in [
            "major",
            "minor",
            "gitVersion",
            "gitCommit",
            "gitTreeState",
            "buildDate",
            "goVersion",
            "compiler",
            "platform",
        ] {
            assert!(json[key].is_string(), "{key}");
        }
        assert!(v.platform.starts_with(std::env::consts::OS));
    }
}
