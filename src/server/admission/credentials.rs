//! The credentials this server presents to admission webhooks, configured as kube-apiserver's
//! are: `--admission-control-config-file` names an AdmissionConfiguration whose
//! `MutatingAdmissionWebhook` and `ValidatingAdmissionWebhook` plugins each name a kubeconfig
//! (`WebhookAdmissionConfiguration.kubeConfigFile`, inline or in a file the plugin's `path`
//! names). A webhook at `host:port` (a Service's `<name>.<namespace>.svc:<port>`) is called as
//! the kubeconfig's user named `host:port`, else `*.<domain>:port` for each domain of the host,
//! else, on port 443, the same without the port, else `*`, else the current context's user:
//! a client certificate, a bearer token (or token file), or basic credentials.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use kube::config::{AuthInfo, Kubeconfig};
use secrecy::ExposeSecret;
use serde::Deserialize;
use serde_json::Value;

use super::hooks::Flavor;

/// What a webhook call authenticates with.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct Credential {
    /// A client certificate and its key, PEM.
    pub identity: Option<Vec<u8>>,
    /// An `Authorization` header value (`Bearer …` or `Basic …`).
    pub authorization: Option<String>,
}

/// The users of one plugin's kubeconfig.
#[derive(Debug, Default)]
struct Users {
    by_name: HashMap<String, Credential>,
    current: Option<Credential>,
}

impl Users {
    /// kube's `defaultAuthenticationInfoResolver.clientConfig` for `target` (`host[:port]`).
    fn for_target(&self, target: &str) -> Option<&Credential> {
        let exact_or_wildcard = |target: &str| {
            self.by_name.get(target).or_else(|| {
                let steps: Vec<&str> = target.split('.').collect();
                (1..steps.len())
                    .find_map(|i| self.by_name.get(&format!("*.{}", steps[i..].join("."))))
            })
        };
        exact_or_wildcard(target)
            .or_else(|| {
                let host = target.strip_suffix(":443")?;
                exact_or_wildcard(host)
            })
            .or_else(|| self.by_name.get("*"))
            .or(self.current.as_ref())
    }
}

/// The credentials of both webhook plugins.
#[derive(Debug, Default)]
pub struct WebhookCredentials {
    mutating: Users,
    validating: Users,
}

#[derive(Deserialize)]
struct AdmissionConfiguration {
    #[serde(default)]
    plugins: Vec<Plugin>,
}

#[derive(Deserialize)]
struct Plugin {
    name: String,
    path: Option<String>,
    configuration: Option<Value>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WebhookAdmissionConfiguration {
    kube_config_file: Option<String>,
}

fn read(path: &Path) -> Result<String, String> {
    std::fs::read_to_string(path).map_err(|e| format!("reading {}: {e}", path.display()))
}

/// `path` as written, or relative to the directory of the file that names it.
fn relative_to(base: &Path, path: &str) -> PathBuf {
    let path = Path::new(path);
    match base.parent() {
        Some(dir) if path.is_relative() => dir.join(path),
        _ => path.to_owned(),
    }
}

impl WebhookCredentials {
    /// Reads the AdmissionConfiguration at `path` and the kubeconfigs it names.
    pub fn load(path: &Path) -> Result<Self, String> {
        let config: AdmissionConfiguration =
            serde_saphyr::from_str(&read(path)?).map_err(|e| format!("{}: {e}", path.display()))?;
        let mut credentials = Self::default();
        for plugin in config.plugins {
            let users = match plugin.name.as_str() {
                "MutatingAdmissionWebhook" => &mut credentials.mutating,
                "ValidatingAdmissionWebhook" => &mut credentials.validating,
                _ => continue,
            };
            let (configuration, base): (WebhookAdmissionConfiguration, PathBuf) =
                match (plugin.configuration, plugin.path) {
                    (Some(inline), _) => (
                        serde_json::from_value(inline)
                            .map_err(|e| format!("{}: {e}", plugin.name))?,
                        path.to_owned(),
                    ),
                    (None, Some(file)) => {
                        let file = relative_to(path, &file);
                        let text = read(&file)?;
                        let parsed = serde_saphyr::from_str(&text)
                            .map_err(|e| format!("{}: {e}", file.display()))?;
                        (parsed, file)
                    }
                    (None, None) => continue,
                };
            if let Some(kubeconfig) = configuration.kube_config_file {
                *users = users_of(&relative_to(&base, &kubeconfig))?;
            }
        }
        Ok(credentials)
    }

    /// The credential for a webhook of `flavor` at `target` (`host[:port]`), if any.
    pub fn for_target(&self, flavor: Flavor, target: &str) -> Option<&Credential> {
        match flavor {
            Flavor::Mutating => &self.mutating,
            Flavor::Validating => &self.validating,
        }
        .for_target(target)
    }
}

fn users_of(path: &Path) -> Result<Users, String> {
    let kubeconfig = Kubeconfig::read_from(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut users = Users::default();
    for named in &kubeconfig.auth_infos {
        if let Some(info) = &named.auth_info {
            users
                .by_name
                .insert(named.name.clone(), credential(info, path)?);
        }
    }
    let current_user = kubeconfig.current_context.as_ref().and_then(|current| {
        kubeconfig
            .contexts
            .iter()
            .find(|c| &c.name == current)?
            .context
            .as_ref()?
            .user
            .clone()
    });
    users.current = current_user.and_then(|user| users.by_name.get(&user).cloned());
    Ok(users)
}

/// One kubeconfig user as a webhook credential (files relative to the kubeconfig).
fn credential(info: &AuthInfo, kubeconfig: &Path) -> Result<Credential, String> {
    use base64::Engine as _;
    let decode = |data: &str| {
        base64::engine::general_purpose::STANDARD
            .decode(data)
            .map_err(|e| format!("{}: {e}", kubeconfig.display()))
    };
    let file = |name: &str| {
        let path = relative_to(kubeconfig, name);
        std::fs::read(&path).map_err(|e| format!("reading {}: {e}", path.display()))
    };
    let pem = |data: &Option<String>, name: &Option<String>| match (data, name) {
        (Some(data), _) => decode(data).map(Some),
        (None, Some(name)) => file(name).map(Some),
        (None, None) => Ok(None),
    };
    let certificate = pem(&info.client_certificate_data, &info.client_certificate)?;
    let key = pem(
        &info
            .client_key_data
            .as_ref()
            .map(|k| k.expose_secret().to_owned()),
        &info.client_key,
    )?;
    let identity = match (certificate, key) {
        (Some(mut certificate), Some(key)) => {
            certificate.push(b'\n');
            certificate.extend(key);
            Some(certificate)
        }
        (None, None) => None,
        _ => {
            return Err(format!(
                "{}: a client certificate needs its key and a key its certificate",
                kubeconfig.display()
            ));
        }
    };
    let token = match (&info.token, &info.token_file) {
        (Some(token), _) => Some(token.expose_secret().to_owned()),
        (None, Some(name)) => Some(String::from_utf8_lossy(&file(name)?).trim().to_owned()),
        (None, None) => None,
    };
    let authorization = match (token, &info.username, &info.password) {
        (Some(token), _, _) => Some(format!("Bearer {token}")),
        (None, Some(user), Some(password)) => Some(format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD
                .encode(format!("{user}:{}", password.expose_secret()))
        )),
        _ => None,
    };
    Ok(Credential {
        identity,
        authorization,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn users(names: &[&str]) -> Users {
        let credential = |name: &str| Credential {
            authorization: Some(name.to_owned()),
            identity: None,
        };
        Users {
            by_name: names
                .iter()
                .map(|n| (n.to_string(), credential(n)))
                .collect(),
            current: Some(credential("current")),
        }
    }

    fn chosen(users: &Users, target: &str) -> Option<String> {
        users.for_target(target)?.authorization.clone()
    }

    #[test]
    fn users_are_matched_as_kube_matches_them() {
        let all = users(&["hooks.policy.svc:8443", "*.policy.svc:8443", "*.svc", "*"]);
        assert_eq!(
            chosen(&all, "hooks.policy.svc:8443").as_deref(),
            Some("hooks.policy.svc:8443")
        );
        assert_eq!(
            chosen(&all, "other.policy.svc:8443").as_deref(),
            Some("*.policy.svc:8443")
        );
        assert_eq!(
            chosen(&all, "other.team.svc:443").as_deref(),
            Some("*.svc"),
            "443 also without the port"
        );
        assert_eq!(chosen(&all, "other.team.svc:8443").as_deref(), Some("*"));
        let none = users(&[]);
        assert_eq!(chosen(&none, "a.b.svc:443").as_deref(), Some("current"));
    }
}
