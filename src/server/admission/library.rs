//! Kubernetes' CEL libraries that policies on our kinds use, on top of the `cel` crate's
//! standard library and extensions: lists (`isSorted`, `sum`, `min`, `max`), sets
//! (`sets.contains`, `sets.equivalent`, `sets.intersects`), regex (`find`,
//! `findAll`), IP addresses and CIDRs (`ip`, `isIP`, `cidr`, `isCIDR`, `family`,
//! `isLoopback`, `isUnspecified`, `isLinkLocalMulticast`, `isLinkLocalUnicast`,
//! `isGlobalUnicast`, `containsIP`, `containsCIDR`, `prefixLength`), quantities (`quantity`,
//! `isQuantity`, `compareTo`, `isLessThan`, `isGreaterThan`, `asInteger`), URLs (`url`,
//! `isURL`, `getScheme`, `getHost`, `getHostname`, `getPort`, `getEscapedPath`) and semantic
//! versions (`semver`, `isSemver`, `major`, `minor`, `patch`, and the comparisons); and
//! formats (`format.dns1123Label()`… and `validate`, in `formats`) and the authorizer's
//! checks (`authz`).
//!
//! kube gives IPs, CIDRs, quantities, URLs and versions types of their own; here each is its
//! canonical string, so kube's expressions (`cidr('10.0.0.0/8').containsIP(ip(x))`,
//! `quantity(a).isLessThan(quantity(b))`, `semver(v).major() == 1`) read and behave the same,
//! and two values compare equal exactly when kube's would.

use std::cmp::Ordering;
use std::net::IpAddr;
use std::sync::Arc;

use cel::extractors::This;
use cel::{Context, ExecutionError, Value};

type Outcome = Result<Value, ExecutionError>;

/// A test on an IP address (`isLoopback()` and its kin).
type IpPredicate = fn(&IpAddr) -> bool;

fn fail(function: &str, message: impl ToString) -> ExecutionError {
    ExecutionError::function_error(function, message)
}

fn parse_ip(function: &str, text: &str) -> Result<IpAddr, ExecutionError> {
    // kube refuses zones and IPv4-mapped IPv6 forms; `IpAddr` has neither zones.
    text.parse::<IpAddr>().map_err(|_| {
        fail(
            function,
            format!("IP Address {text:?} parse error during conversion from string"),
        )
    })
}

fn parse_cidr(function: &str, text: &str) -> Result<ipnet::IpNet, ExecutionError> {
    text.parse::<ipnet::IpNet>().map_err(|_| {
        fail(
            function,
            format!("network address {text:?} parse error during conversion from string"),
        )
    })
}

/// A quantity in milli-units (exact for every value a machine spec holds).
fn parse_quantity(function: &str, text: &str) -> Result<i128, ExecutionError> {
    let bad = || {
        fail(
            function,
            format!(
                "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$': {text:?}"
            ),
        )
    };
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '+' || c == '-'))
        .unwrap_or(text.len());
    let (number, suffix) = text.split_at(split);
    let multiplier: i128 = match suffix {
        "" => 1000,
        "m" => 1,
        "k" => 1_000_000,
        "M" => 1_000_000_000,
        "G" => 1_000_000_000_000,
        "T" => 1_000_000_000_000_000,
        "P" => 1_000_000_000_000_000_000,
        "Ki" => 1024 * 1000,
        "Mi" => (1 << 20) * 1000,
        "Gi" => (1 << 30) * 1000,
        "Ti" => (1i128 << 40) * 1000,
        "Pi" => (1i128 << 50) * 1000,
        _ => return Err(bad()),
    };
    let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
    let negative = whole.starts_with('-');
    let whole: i128 = match whole.trim_start_matches(['+', '-']) {
        "" if !fraction.is_empty() => 0,
        digits => digits.parse().map_err(|_| bad())?,
    };
    let mut value = whole.checked_mul(multiplier).ok_or_else(bad)?;
    let mut scale = multiplier;
    for digit in fraction.chars() {
        let digit = digit.to_digit(10).ok_or_else(bad)? as i128;
        scale /= 10;
        value += digit * scale;
    }
    Ok(if negative { -value } else { value })
}

/// `major.minor.patch[-pre][+build]`, leading `v` refused (kube's strict semver).
fn parse_semver(function: &str, text: &str) -> Result<(u64, u64, u64, String), ExecutionError> {
    let bad = || fail(function, format!("could not parse {text:?} as version"));
    let core = text.split('+').next().unwrap_or_default();
    let (numbers, pre) = core.split_once('-').unwrap_or((core, ""));
    let parts: Vec<&str> = numbers.split('.').collect();
    let [major, minor, patch] = parts[..] else {
        return Err(bad());
    };
    let number = |s: &str| {
        (!s.is_empty() && (s == "0" || !s.starts_with('0')))
            .then(|| s.parse::<u64>().ok())
            .flatten()
            .ok_or_else(bad)
    };
    Ok((
        number(major)?,
        number(minor)?,
        number(patch)?,
        pre.to_owned(),
    ))
}

fn compare_semver(a: &(u64, u64, u64, String), b: &(u64, u64, u64, String)) -> Ordering {
    (a.0, a.1, a.2)
        .cmp(&(b.0, b.1, b.2))
        .then_with(|| match (a.3.is_empty(), b.3.is_empty()) {
            (true, true) => Ordering::Equal,
            (true, false) => Ordering::Greater,
            (false, true) => Ordering::Less,
            (false, false) => a.3.cmp(&b.3),
        })
}

/// Which kind of value a string-backed receiver stands for, by what parses.
fn compare(function: &str, a: &str, b: &str) -> Result<Ordering, ExecutionError> {
    if let (Ok(a), Ok(b)) = (parse_semver(function, a), parse_semver(function, b)) {
        return Ok(compare_semver(&a, &b));
    }
    Ok(parse_quantity(function, a)?.cmp(&parse_quantity(function, b)?))
}

fn int_of(function: &str, value: &Value) -> Result<f64, ExecutionError> {
    match value {
        Value::Int(i) => Ok(*i as f64),
        Value::UInt(u) => Ok(*u as f64),
        Value::Float(f) => Ok(*f),
        other => Err(fail(
            function,
            format!("not a number: {:?}", other.type_of()),
        )),
    }
}

fn ordered(list: &[Value]) -> Result<Vec<f64>, ExecutionError> {
    list.iter().map(|v| int_of("isSorted", v)).collect()
}

fn url(function: &str, text: &str) -> Result<reqwest::Url, ExecutionError> {
    reqwest::Url::parse(text).map_err(|e| fail(function, format!("URL {text:?}: {e}")))
}

/// Go's `net.IP.IsLinkLocalMulticast`: 224.0.0.0/24, ff02::/16 (any flags).
fn is_link_local_multicast(ip: &IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => v4.octets()[..3] == [224, 0, 0],
        IpAddr::V6(v6) => v6.octets()[0] == 0xff && v6.octets()[1] & 0x0f == 0x02,
    }
}

/// Go's `net.IP.IsLinkLocalUnicast`: 169.254.0.0/16, fe80::/10.
fn is_link_local_unicast(ip: &IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => v4.is_link_local(),
        IpAddr::V6(v6) => v6.segments()[0] & 0xffc0 == 0xfe80,
    }
}

/// Go's `net.IP.IsGlobalUnicast`: neither broadcast, unspecified, loopback, multicast nor
/// link-local unicast. Private ranges count as global, as in Go.
fn is_global_unicast(ip: &IpAddr) -> bool {
    let broadcast = matches!(ip, IpAddr::V4(v4) if v4.is_broadcast());
    !(broadcast
        || ip.is_unspecified()
        || ip.is_loopback()
        || ip.is_multicast()
        || is_link_local_unicast(ip))
}

/// Registers the library on an evaluation's context.
pub fn register(context: &mut Context) {
    let add = |result: Result<(), cel::DeclarationError>| {
        debug_assert!(result.is_ok(), "{result:?}");
    };
    // Lists of numbers or strings.
    add(
        context.add_function("isSorted", |This(list): This<Arc<Vec<Value>>>| -> Outcome {
            if list.iter().all(|v| matches!(v, Value::String(_))) {
                return Ok(Value::Bool(list.windows(2).all(|w| w[0] <= w[1])));
            }
            let numbers = ordered(&list)?;
            Ok(Value::Bool(numbers.windows(2).all(|w| w[0] <= w[1])))
        }),
    );
    add(
        context.add_function("sum", |This(list): This<Arc<Vec<Value>>>| -> Outcome {
            if list.iter().all(|v| matches!(v, Value::Int(_))) {
                let total = list.iter().try_fold(0i64, |sum, v| match v {
                    Value::Int(i) => sum.checked_add(*i),
                    _ => None,
                });
                return total
                    .map(Value::Int)
                    .ok_or_else(|| fail("sum", "integer overflow"));
            }
            Ok(Value::Float(ordered(&list)?.iter().sum()))
        }),
    );
    for (name, pick) in [("min", Ordering::Less), ("max", Ordering::Greater)] {
        add(
            context.add_function(name, move |This(list): This<Arc<Vec<Value>>>| -> Outcome {
                let mut best: Option<&Value> = None;
                for value in list.iter() {
                    let better = match best {
                        None => true,
                        Some(current) => {
                            int_of(name, value)?.partial_cmp(&int_of(name, current)?) == Some(pick)
                        }
                    };
                    if better {
                        best = Some(value);
                    }
                }
                best.cloned()
                    .ok_or_else(|| fail(name, format!("{name} called on an empty list")))
            }),
        );
    }
    // Sets: lists taken as sets, elements compared by CEL equality.
    let within = |small: &[Value], big: &[Value]| small.iter().all(|v| big.contains(v));
    add(context.add_function(
        "sets.contains",
        move |list: Arc<Vec<Value>>, sublist: Arc<Vec<Value>>| -> Outcome {
            Ok(Value::Bool(within(&sublist, &list)))
        },
    ));
    add(context.add_function(
        "sets.equivalent",
        move |a: Arc<Vec<Value>>, b: Arc<Vec<Value>>| -> Outcome {
            Ok(Value::Bool(within(&a, &b) && within(&b, &a)))
        },
    ));
    add(context.add_function(
        "sets.intersects",
        |a: Arc<Vec<Value>>, b: Arc<Vec<Value>>| -> Outcome {
            Ok(Value::Bool(a.iter().any(|v| b.contains(v))))
        },
    ));
    // Regular expressions.
    add(context.add_function(
        "find",
        |This(text): This<Arc<String>>, pattern: Arc<String>| -> Outcome {
            let re = regex::Regex::new(&pattern).map_err(|e| fail("find", e))?;
            Ok(Value::from(re.find(&text).map_or("", |m| m.as_str())))
        },
    ));
    add(context.add_function(
        "findAll",
        |This(text): This<Arc<String>>, pattern: Arc<String>| -> Outcome {
            let re = regex::Regex::new(&pattern).map_err(|e| fail("findAll", e))?;
            Ok(Value::from(
                re.find_iter(&text)
                    .map(|m| Value::from(m.as_str()))
                    .collect::<Vec<_>>(),
            ))
        },
    ));
    // IP addresses and CIDRs.
    add(context.add_function("ip", |text: Arc<String>| -> Outcome {
        Ok(Value::from(parse_ip("ip", &text)?.to_string()))
    }));
    add(
        context.add_function("isIP", |text: Arc<String>| -> Outcome {
            Ok(Value::Bool(text.parse::<IpAddr>().is_ok()))
        }),
    );
    add(
        context.add_function("cidr", |text: Arc<String>| -> Outcome {
            Ok(Value::from(parse_cidr("cidr", &text)?.to_string()))
        }),
    );
    add(
        context.add_function("isCIDR", |text: Arc<String>| -> Outcome {
            Ok(Value::Bool(text.parse::<ipnet::IpNet>().is_ok()))
        }),
    );
    add(
        context.add_function("family", |This(text): This<Arc<String>>| -> Outcome {
            let ip = match text.parse::<ipnet::IpNet>() {
                Ok(net) => net.addr(),
                Err(_) => parse_ip("family", &text)?,
            };
            Ok(Value::Int(if ip.is_ipv4() { 4 } else { 6 }))
        }),
    );
    let predicates: [(&'static str, IpPredicate); 5] = [
        ("isLoopback", IpAddr::is_loopback),
        ("isUnspecified", IpAddr::is_unspecified),
        ("isLinkLocalMulticast", is_link_local_multicast),
        ("isLinkLocalUnicast", is_link_local_unicast),
        ("isGlobalUnicast", is_global_unicast),
    ];
    for (name, predicate) in predicates {
        add(
            context.add_function(name, move |This(text): This<Arc<String>>| -> Outcome {
                Ok(Value::Bool(predicate(&parse_ip(name, &text)?)))
            }),
        );
    }
    add(context.add_function(
        "containsIP",
        |This(net): This<Arc<String>>, ip: Arc<String>| -> Outcome {
            let net = parse_cidr("containsIP", &net)?;
            Ok(Value::Bool(net.contains(&parse_ip("containsIP", &ip)?)))
        },
    ));
    add(context.add_function(
        "containsCIDR",
        |This(net): This<Arc<String>>, other: Arc<String>| -> Outcome {
            let net = parse_cidr("containsCIDR", &net)?;
            Ok(Value::Bool(
                net.contains(&parse_cidr("containsCIDR", &other)?),
            ))
        },
    ));
    add(
        context.add_function("prefixLength", |This(net): This<Arc<String>>| -> Outcome {
            Ok(Value::Int(i64::from(
                parse_cidr("prefixLength", &net)?.prefix_len(),
            )))
        }),
    );
    // Quantities.
    add(
        context.add_function("quantity", |text: Arc<String>| -> Outcome {
            parse_quantity("quantity", &text)?;
            Ok(Value::String(text))
        }),
    );
    add(
        context.add_function("isQuantity", |text: Arc<String>| -> Outcome {
            Ok(Value::Bool(parse_quantity("isQuantity", &text).is_ok()))
        }),
    );
    add(
        context.add_function("asInteger", |This(text): This<Arc<String>>| -> Outcome {
            let milli = parse_quantity("asInteger", &text)?;
            if milli % 1000 != 0 {
                return Err(fail("asInteger", "cannot convert value to integer"));
            }
            i64::try_from(milli / 1000)
                .map(Value::Int)
                .map_err(|_| fail("asInteger", "cannot convert value to integer"))
        }),
    );
    // Semantic versions.
    add(
        context.add_function("semver", |text: Arc<String>| -> Outcome {
            parse_semver("semver", &text)?;
            Ok(Value::String(text))
        }),
    );
    add(
        context.add_function("isSemver", |text: Arc<String>| -> Outcome {
            Ok(Value::Bool(parse_semver("isSemver", &text).is_ok()))
        }),
    );
    for (name, index) in [("major", 0), ("minor", 1), ("patch", 2)] {
        add(
            context.add_function(name, move |This(text): This<Arc<String>>| -> Outcome {
                let (major, minor, patch, _) = parse_semver(name, &text)?;
                let part = [major, minor, patch][index];
                Ok(Value::Int(i64::try_from(part).unwrap_or(i64::MAX)))
            }),
        );
    }
    // Comparisons shared by quantities and versions.
    add(context.add_function(
        "compareTo",
        |This(a): This<Arc<String>>, b: Arc<String>| -> Outcome {
            Ok(Value::Int(match compare("compareTo", &a, &b)? {
                Ordering::Less => -1,
                Ordering::Equal => 0,
                Ordering::Greater => 1,
            }))
        },
    ));
    add(context.add_function(
        "isLessThan",
        |This(a): This<Arc<String>>, b: Arc<String>| -> Outcome {
            Ok(Value::Bool(
                compare("isLessThan", &a, &b)? == Ordering::Less,
            ))
        },
    ));
    add(context.add_function(
        "isGreaterThan",
        |This(a): This<Arc<String>>, b: Arc<String>| -> Outcome {
            Ok(Value::Bool(
                compare("isGreaterThan", &a, &b)? == Ordering::Greater,
            ))
        },
    ));
    // URLs.
    add(context.add_function("url", |text: Arc<String>| -> Outcome {
        Ok(Value::from(url("url", &text)?.to_string()))
    }));
    add(
        context.add_function("isURL", |text: Arc<String>| -> Outcome {
            Ok(Value::Bool(reqwest::Url::parse(&text).is_ok()))
        }),
    );
    add(
        context.add_function("getScheme", |This(text): This<Arc<String>>| -> Outcome {
            Ok(Value::from(url("getScheme", &text)?.scheme()))
        }),
    );
    add(
        context.add_function("getHost", |This(text): This<Arc<String>>| -> Outcome {
            let parsed = url("getHost", &text)?;
            let host = parsed.host_str().unwrap_or_default();
            Ok(Value::from(match parsed.port() {
                Some(port) => format!("{host}:{port}"),
                None => host.to_owned(),
            }))
        }),
    );
    add(
        context.add_function("getHostname", |This(text): This<Arc<String>>| -> Outcome {
            let parsed = url("getHostname", &text)?;
            Ok(Value::from(
                parsed
                    .host_str()
                    .unwrap_or_default()
                    .trim_matches(['[', ']']),
            ))
        }),
    );
    add(
        context.add_function("getPort", |This(text): This<Arc<String>>| -> Outcome {
            let port = url("getPort", &text)?
                .port()
                .map(|p| p.to_string())
                .unwrap_or_default();
            Ok(Value::from(port))
        }),
    );
    add(context.add_function(
        "getEscapedPath",
        |This(text): This<Arc<String>>| -> Outcome {
            Ok(Value::from(url("getEscapedPath", &text)?.path()))
        },
    ));
    super::formats::register(context);
    super::authz::register(context);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantities_and_versions_parse_as_kube_does() {
        assert_eq!(parse_quantity("q", "1Gi").unwrap(), (1 << 30) * 1000);
        assert_eq!(parse_quantity("q", "500m").unwrap(), 500);
        assert_eq!(parse_quantity("q", "1.5").unwrap(), 1500);
        assert_eq!(parse_quantity("q", "-2k").unwrap(), -2_000_000);
        assert!(parse_quantity("q", "1GB").is_err());
        assert_eq!(
            parse_semver("s", "1.32.3").unwrap(),
            (1, 32, 3, String::new())
        );
        assert!(parse_semver("s", "v1.32.3").is_err());
        assert!(parse_semver("s", "1.02.3").is_err());
        assert_eq!(
            compare("c", "1.32.3-rc.1", "1.32.3").unwrap(),
            Ordering::Less
        );
        assert_eq!(compare("c", "1Gi", "1000Mi").unwrap(), Ordering::Greater);
    }
}
