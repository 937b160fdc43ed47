//! local_update.rs — the file:// object store: object_store's LocalFileSystem
//! plus the one operation it lacks, a conditional overwrite
//! (`PutMode::Update`), which SlateDB's garbage collector needs to move its
//! manifest and compaction-record boundaries. Without it, old manifests and
//! `.compactions` records were never deleted from a folder store.
//!
//! An update compares the object's current e_tag (LocalFileSystem derives it
//! from inode, mtime and size, and every write replaces the file through a
//! rename, so any write changes it) with the caller's, then overwrites. The
//! compare and the overwrite run under an exclusive flock on the object's
//! folder, so two updates of one object — from this process or another
//! moraine on the same folder — never both win. Every other operation is
//! LocalFileSystem's own.
use std::fmt;
use std::fs::File;
use std::ops::Range;
use std::path::PathBuf;
use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;
use futures_util::stream::BoxStream;
use object_store::local::LocalFileSystem;
use object_store::path::Path;
use object_store::{
    CopyOptions, Error, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta,
    ObjectStore, ObjectStoreExt, PutMode, PutMultipartOptions, PutOptions, PutPayload, PutResult, RenameOptions,
    Result,
};

#[derive(Debug)]
pub struct LocalUpdateStore {
    fs: Arc<LocalFileSystem>,
}

impl LocalUpdateStore {
    pub fn new(fs: LocalFileSystem) -> Self {
        LocalUpdateStore { fs: Arc::new(fs) }
    }
}

impl fmt::Display for LocalUpdateStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "LocalUpdateStore({})", self.fs)
    }
}

fn generic(e: std::io::Error) -> Error {
    Error::Generic {
        store: "LocalUpdateStore",
        source: Box::new(e),
    }
}

#[async_trait]
impl ObjectStore for LocalUpdateStore {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> Result<PutResult> {
        let PutMode::Update(version) = &opts.mode else {
            return self.fs.put_opts(location, payload, opts).await;
        };
        // The object's folder exists: SlateDB updates only objects it created.
        let mut folder: PathBuf = self.fs.path_to_filesystem(location)?;
        folder.pop();
        let lock = File::open(&folder).map_err(generic)?;
        let held = tokio::task::spawn_blocking(move || lock.lock().map(|_| lock))
            .await
            .map_err(|e| generic(std::io::Error::other(e)))?
            .map_err(generic)?;
        let current = match self.fs.head(location).await {
            Ok(meta) => meta.e_tag,
            Err(Error::NotFound { .. }) => None,
            Err(e) => return Err(e),
        };
        if current.is_none() || current != version.e_tag {
            drop(held);
            return Err(Error::Precondition {
                path: location.to_string(),
                source: format!(
                    "object changed: e_tag {:?}, expected {:?}",
                    current, version.e_tag
                )
                .into(),
            });
        }
        let mut plain = opts.clone();
        plain.mode = PutMode::Overwrite;
        let r = self.fs.put_opts(location, payload, plain).await;
        drop(held); // closing the folder's descriptor releases the lock
        r
    }

    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> Result<Box<dyn MultipartUpload>> {
        self.fs.put_multipart_opts(location, opts).await
    }

    async fn get_opts(&self, location: &Path, options: GetOptions) -> Result<GetResult> {
        self.fs.get_opts(location, options).await
    }

    async fn get_ranges(&self, location: &Path, ranges: &[Range<u64>]) -> Result<Vec<Bytes>> {
        self.fs.get_ranges(location, ranges).await
    }

    fn delete_stream(
        &self,
        locations: BoxStream<'static, Result<Path>>,
    ) -> BoxStream<'static, Result<Path>> {
        self.fs.delete_stream(locations)
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, Result<ObjectMeta>> {
        self.fs.list(prefix)
    }

    fn list_with_offset(
        &self,
        prefix: Option<&Path>,
        offset: &Path,
    ) -> BoxStream<'static, Result<ObjectMeta>> {
        self.fs.list_with_offset(prefix, offset)
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> Result<ListResult> {
        self.fs.list_with_delimiter(prefix).await
    }

    async fn copy_opts(&self, from: &Path, to: &Path, options: CopyOptions) -> Result<()> {
        self.fs.copy_opts(from, to, options).await
    }

    async fn rename_opts(&self, from: &Path, to: &Path, options: RenameOptions) -> Result<()> {
        self.fs.rename_opts(from, to, options).await
    }
}
