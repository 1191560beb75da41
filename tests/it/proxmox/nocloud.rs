//! The NoCloud ISO read back by Debian's `isoinfo` and `xorriso`, and images written by
//! `genisoimage`/`xorriso` read by our reader.

use std::path::Path;
use std::process::Command;

use capmox_apiserver::proxmox::nocloud::{NoCloud, read_iso, write_iso};

const USER_DATA: &str = "#cloud-config\nhostname: cp-0\nruncmd:\n  - [kubeadm, init]\n";
const META_DATA: &str = "instance-id: 413c6ca3-d043-43fe-9fb4-bc4a6e60c7ef\nlocal-hostname: cp-0\n";
const NETWORK: &str = "network:\n  version: 2\n  ethernets:\n    eth0:\n      dhcp4: true\n";

fn run(program: &str, args: &[&str]) -> String {
    let out = Command::new(program)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("{program} must be installed (tests/run installs it): {e}"));
    assert!(
        out.status.success(),
        "{program} {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn write_to(dir: &Path, name: &str, bytes: &[u8]) -> String {
    let path = dir.join(name);
    std::fs::write(&path, bytes).expect("write");
    path.to_string_lossy().into_owned()
}

#[test]
fn isoinfo_reads_label_rock_ridge_joliet_and_contents() {
    let dir = tempfile::tempdir().expect("tempdir");
    let seed = NoCloud::new(USER_DATA, META_DATA)
        .with_network_config(NETWORK)
        .with_vendor_data("#cloud-config\npackages: [qemu-guest-agent]\n");
    let bytes = write_iso(&seed).expect("writes");
    let iso = write_to(dir.path(), "seed.iso", &bytes);

    let info = run("isoinfo", &["-d", "-i", &iso]);
    assert!(info.contains("Volume id: cidata"), "{info}");
    assert!(
        info.contains("Rock Ridge signatures version 1 found"),
        "{info}"
    );
    assert!(info.contains("Joliet with UCS level 3 found"), "{info}");
    let blocks: usize = info
        .lines()
        .find_map(|l| l.strip_prefix("Volume size is: "))
        .and_then(|n| n.trim().parse().ok())
        .expect("volume size");
    assert_eq!(blocks * 2048, bytes.len(), "output is exactly the volume");

    let listing = run("isoinfo", &["-R", "-f", "-i", &iso]);
    let mut names: Vec<&str> = listing.lines().collect();
    names.sort();
    assert_eq!(
        names,
        [
            "/meta-data",
            "/network-config",
            "/user-data",
            "/vendor-data"
        ]
    );
    assert_eq!(
        run("isoinfo", &["-R", "-x", "/user-data", "-i", &iso]),
        USER_DATA
    );
    assert_eq!(
        run("isoinfo", &["-J", "-x", "/meta-data", "-i", &iso]),
        META_DATA
    );
    assert_eq!(
        run("isoinfo", &["-R", "-x", "/network-config", "-i", &iso]),
        NETWORK
    );
}

#[test]
fn xorriso_lists_and_extracts() {
    let dir = tempfile::tempdir().expect("tempdir");
    let bytes = write_iso(&NoCloud::new(USER_DATA, META_DATA)).expect("writes");
    let iso = write_to(dir.path(), "seed.iso", &bytes);
    let out = Command::new("xorriso")
        .args(["-indev", &iso, "-ls", "/"])
        .output()
        .expect("xorriso must be installed");
    assert!(out.status.success());
    let listing = String::from_utf8_lossy(&out.stdout);
    assert!(
        listing.contains("'meta-data'") && listing.contains("'user-data'"),
        "{listing}"
    );
    assert!(
        !listing.contains("network-config"),
        "empty files are omitted: {listing}"
    );
    let extracted = dir.path().join("user-data");
    let target = extracted.to_string_lossy().into_owned();
    let status = Command::new("xorriso")
        .args([
            "-osirrox",
            "on",
            "-indev",
            &iso,
            "-extract",
            "/user-data",
            &target,
        ])
        .output()
        .expect("xorriso");
    assert!(
        status.status.success(),
        "{}",
        String::from_utf8_lossy(&status.stderr)
    );
    assert_eq!(
        std::fs::read_to_string(&extracted).expect("extracted"),
        USER_DATA
    );
}

#[test]
fn empty_optional_files_are_left_out() {
    let seed = NoCloud::new(USER_DATA, META_DATA)
        .with_network_config("")
        .with_vendor_data("");
    let iso = read_iso(&write_iso(&seed).expect("writes")).expect("reads");
    assert_eq!(
        iso.files.keys().collect::<Vec<_>>(),
        ["meta-data", "user-data"]
    );
}

/// Builds a seed directory and an ISO of it with an external tool.
fn external_iso(dir: &Path, tool: &[&str]) -> Vec<u8> {
    let src = dir.join("src");
    std::fs::create_dir_all(&src).expect("mkdir");
    std::fs::write(src.join("user-data"), USER_DATA).expect("write");
    std::fs::write(src.join("meta-data"), META_DATA).expect("write");
    std::fs::write(src.join("network-config"), NETWORK).expect("write");
    let out = dir.join("ext.iso");
    let (program, flags) = tool.split_first().expect("tool");
    let mut args: Vec<String> = flags.iter().map(|s| s.to_string()).collect();
    args.extend([
        "-V".into(),
        "cidata".into(),
        "-o".into(),
        out.to_string_lossy().into_owned(),
        src.to_string_lossy().into_owned(),
    ]);
    let status = Command::new(program)
        .args(&args)
        .output()
        .unwrap_or_else(|e| panic!("{program}: {e}"));
    assert!(
        status.status.success(),
        "{}",
        String::from_utf8_lossy(&status.stderr)
    );
    std::fs::read(out).expect("read iso")
}

#[test]
fn our_reader_reads_what_debian_tools_write() {
    for tool in [
        &["genisoimage", "-quiet", "-J", "-R"][..],
        &["genisoimage", "-quiet", "-J"][..],
        &["xorriso", "-as", "mkisofs", "-quiet", "-R", "-J"][..],
    ] {
        let dir = tempfile::tempdir().expect("tempdir");
        let seed = NoCloud::from_iso(&external_iso(dir.path(), tool))
            .unwrap_or_else(|e| panic!("{tool:?}: {e}"));
        assert_eq!(seed.user_data, USER_DATA.as_bytes(), "{tool:?}");
        assert_eq!(seed.meta_data, META_DATA.as_bytes(), "{tool:?}");
        assert_eq!(
            seed.network_config.as_deref(),
            Some(NETWORK.as_bytes()),
            "{tool:?}"
        );
    }
}

#[test]
fn seeds_need_the_cidata_label() {
    let dir = tempfile::tempdir().expect("tempdir");
    let src = dir.path().join("src");
    std::fs::create_dir_all(&src).expect("mkdir");
    std::fs::write(src.join("user-data"), USER_DATA).expect("write");
    std::fs::write(src.join("meta-data"), META_DATA).expect("write");
    let out = dir.path().join("other.iso");
    run(
        "genisoimage",
        &[
            "-quiet",
            "-J",
            "-R",
            "-V",
            "config-2",
            "-o",
            &out.to_string_lossy(),
            &src.to_string_lossy(),
        ],
    );
    let err = NoCloud::from_iso(&std::fs::read(out).expect("read")).expect_err("wrong label");
    assert!(err.to_string().contains("config-2"), "{err}");
}
