//! Storage calls: list, content, upload, delete.

use reqwest::multipart::{Form, Part};

use super::{Body, Client, Error, path};
use crate::proxmox::form;
use crate::proxmox::types::{StorageContent, StorageInfo, VolumeInfo};
use crate::proxmox::upid::Upid;

impl Client {
    /// `GET /nodes/{node}/storage[?content=...]`. PVE's order is unspecified.
    pub async fn storages(
        &self,
        node: &str,
        content: Option<&str>,
    ) -> Result<Vec<StorageInfo>, Error> {
        let query: Vec<(String, String)> = content
            .map(|c| vec![("content".to_string(), c.to_string())])
            .unwrap_or_default();
        self.get(&path(&["nodes", node, "storage"]), &query).await
    }

    /// `GET /nodes/{node}/storage/{storage}/content[?content=...]`.
    pub async fn storage_content(
        &self,
        node: &str,
        storage: &str,
        content: Option<&str>,
    ) -> Result<Vec<StorageContent>, Error> {
        let query: Vec<(String, String)> = content
            .map(|c| vec![("content".to_string(), c.to_string())])
            .unwrap_or_default();
        self.get(
            &path(&["nodes", node, "storage", storage, "content"]),
            &query,
        )
        .await
    }

    /// `GET .../content/{volid}`: details of one volume (`local:iso/x.iso`).
    pub async fn volume_info(
        &self,
        node: &str,
        storage: &str,
        volid: &str,
    ) -> Result<VolumeInfo, Error> {
        self.get(&volume_path(node, storage, volid), &[]).await
    }

    /// `DELETE .../content/{volid}`: starts an `imgdel` task.
    pub async fn delete_volume(
        &self,
        node: &str,
        storage: &str,
        volid: &str,
    ) -> Result<Upid, Error> {
        self.delete(&volume_path(node, storage, volid), &[]).await
    }

    /// `POST /nodes/{node}/storage/{storage}/upload` (multipart: `content` first, then
    /// the file part named `filename`). Returns the `imgcopy` task, which runs on `node`.
    pub async fn upload(
        &self,
        node: &str,
        storage: &str,
        content: &str,
        filename: &str,
        bytes: Vec<u8>,
    ) -> Result<Upid, Error> {
        let part = Part::bytes(bytes)
            .file_name(filename.to_string())
            .mime_str("application/octet-stream")
            .map_err(|e| Error::Config(format!("upload part: {e}")))?;
        let form = Form::new()
            .text("content", content.to_string())
            .part("filename", part);
        let path = path(&["nodes", node, "storage", storage, "upload"]);
        self.call(reqwest::Method::POST, &path, &[], Body::Multipart(form))
            .await
    }
}

/// The volume id is "the rest of the URI": its `/` stays raw.
fn volume_path(node: &str, storage: &str, volid: &str) -> String {
    format!(
        "{}/{}",
        path(&["nodes", node, "storage", storage, "content"]),
        form::encode_path(volid, true)
    )
}
