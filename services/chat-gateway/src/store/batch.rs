//! How writes reach the database: one transaction per write on PostgreSQL,
//! group commit on SQLite.
//!
//! Every write is a [`Write`]: statements run inside a transaction that the
//! write does not own. PostgreSQL runs each in its own transaction, side by
//! side (row locks serialise only what conflicts). SQLite has one writer at
//! a time, and a statement costs a round trip to its connection's thread, so
//! a transaction per write made every turn queue behind the whole
//! BEGIN…COMMIT of the turns before it. There, writes go to one writer task
//! that runs everything queued up (at most `max_batch`) in one transaction:
//! one BEGIN and one COMMIT (one WAL append) for many turns, and a lone
//! write pays exactly what it paid before. A write's reply is sent only
//! after its transaction committed. When any statement of a batch fails, the
//! batch is rolled back and each write runs again alone, so one write's
//! failure (a duplicate request id, say) never fails another.
//!
//! Writes that find nothing to change (an unknown conversation) must return
//! before they write anything: they share the transaction with others and
//! cannot roll it back.

use std::sync::Arc;

use futures::{StreamExt, future::BoxFuture};
use sqlx::{Any, AnyConnection, AnyPool, AssertSqlSafe, Either, any::AnyRow, pool::PoolConnection};
use tokio::sync::{Notify, mpsc, oneshot};

use super::{
    StoreError,
    group::{Joined, Statements},
};

/// Writes waiting for the SQLite writer before callers wait to queue.
const QUEUE: usize = 4096;

/// Commits between two checkpoints run beside the writer (see
/// [`Checkpoints`]): a turn commits two or three times, writing about a
/// dozen pages each.
const CHECKPOINT_EVERY: u32 = 32;

/// Run on every connection of an SQLite file: the WAL may grow to 10 000
/// pages (SQLite's default is 1 000) before a commit checkpoints, which
/// happens only when the checkpoints beside the writer fall behind.
pub(crate) const AUTOCHECKPOINT: &str = "PRAGMA wal_autocheckpoint = 10000";

/// A write: statements run inside a transaction it does not own. It may run
/// twice (alone, after its batch failed), so it keeps its inputs.
pub(crate) trait Write: Send + Sync + 'static {
    /// What the write tells its caller.
    type Output: Send + 'static;

    /// Whether each of the write's statements stands alone (none needs
    /// another undone with it): PostgreSQL then runs them without
    /// `BEGIN`…`COMMIT`, each committed as it ends, so that a replica
    /// stopped between two round trips (SIGSTOP, a cut network) holds no
    /// row lock that another replica's write would wait on. SQLite's
    /// writer batches them with the rest.
    fn autocommit(&self) -> bool {
        false
    }

    /// Runs the statements on `conn`, inside a transaction (unless
    /// [`Write::autocommit`] on PostgreSQL).
    fn run<'c>(
        &'c self,
        conn: &'c mut AnyConnection,
    ) -> BoxFuture<'c, Result<Self::Output, StoreError>>;

    /// [`Write::run`], except that the write's last statements, when
    /// nothing else in the write depends on their results, may come back
    /// unrun: the SQLite writer sends them in the query of its `COMMIT`, one
    /// round trip to the connection's thread fewer. The output is known
    /// without them, or read from the rows they return
    /// ([`Write::output_from`]). Runs everything unless the write says
    /// otherwise.
    fn run_deferring<'c>(
        &'c self,
        conn: &'c mut AnyConnection,
    ) -> BoxFuture<'c, Result<Deferred<Self::Output>, StoreError>> {
        Box::pin(async move {
            Ok(Deferred {
                output: Some(self.run(conn).await?),
                tail: None,
            })
        })
    }

    /// The output of a write whose [`Write::run_deferring`] left it to be
    /// read from what its tail returns (`output: None`): `rows` are the
    /// rows of the tail's statements, in order. Such a write sends its
    /// tail with the `COMMIT` although its caller needs a result from it.
    fn output_from(&self, rows: &[AnyRow]) -> Result<Self::Output, StoreError> {
        let _ = rows;
        Err(StoreError::Database(sqlx::Error::Protocol(
            "the write left no output to read from its rows".into(),
        )))
    }
}

/// Runs the whole of `write`: [`Write::run_deferring`], then its tail. The
/// [`Write::run`] of a write whose deferring run is its run.
pub(crate) async fn run_whole<W: Write>(
    write: &W,
    conn: &mut AnyConnection,
) -> Result<W::Output, StoreError> {
    write.run_deferring(conn).await?.run_tail(write, conn).await
}

/// What [`Write::run_deferring`] leaves: the output, and the statements
/// still to run before the write is whole.
pub(crate) struct Deferred<T> {
    /// The write's output, valid once `tail` has run and committed; `None`:
    /// it is read from the rows the tail returns ([`Write::output_from`]).
    pub(crate) output: Option<T>,
    /// The write's last statements, not run yet.
    pub(crate) tail: Option<Statements>,
}

impl<T> Deferred<T> {
    /// Runs the tail of `write`: the whole write has then run.
    pub(crate) async fn run_tail<W: Write<Output = T>>(
        self,
        write: &W,
        conn: &mut AnyConnection,
    ) -> Result<T, StoreError> {
        let rows = match self.tail {
            Some(tail) => tail.fetch_all(conn).await?,
            None => Vec::new(),
        };
        match self.output {
            Some(output) => Ok(output),
            None => write.output_from(&rows),
        }
    }
}

/// A write whose output type is erased, so writes of every kind queue
/// together.
pub(crate) trait Job: Send {
    /// Runs the write, keeping its output for the reply. With `defer`, its
    /// last statements may stay unrun ([`Write::run_deferring`]): they are
    /// then [`Job::take_tail`]'s.
    fn run<'c>(
        &'c mut self,
        conn: &'c mut AnyConnection,
        defer: bool,
    ) -> BoxFuture<'c, Result<(), StoreError>>;

    /// The statements the last [`Job::run`] left unrun, if any.
    fn take_tail(&mut self) -> Option<Statements>;

    /// The rows the tail returned, once it ran and committed (with the
    /// `COMMIT`).
    fn tail_returned(&mut self, rows: &[AnyRow]);

    /// Replies to the caller: the output when `committed` is `Ok`.
    fn reply(self: Box<Self>, committed: Result<(), StoreError>);
}

struct Pending<W: Write> {
    write: W,
    /// The output, once run; `None` after a run that left it to the tail's
    /// rows, until they came back.
    output: Option<Result<W::Output, StoreError>>,
    tail: Option<Statements>,
    reply: oneshot::Sender<Result<W::Output, StoreError>>,
}

impl<W: Write> Job for Pending<W> {
    fn run<'c>(
        &'c mut self,
        conn: &'c mut AnyConnection,
        defer: bool,
    ) -> BoxFuture<'c, Result<(), StoreError>> {
        Box::pin(async move {
            let Self {
                write,
                output,
                tail,
                ..
            } = self;
            *output = None;
            *tail = None;
            if defer {
                let deferred = write.run_deferring(conn).await?;
                *output = deferred.output.map(Ok);
                *tail = deferred.tail;
            } else {
                *output = Some(Ok(write.run(conn).await?));
            }
            Ok(())
        })
    }

    fn take_tail(&mut self) -> Option<Statements> {
        self.tail.take()
    }

    fn tail_returned(&mut self, rows: &[AnyRow]) {
        if self.output.is_none() {
            self.output = Some(self.write.output_from(rows));
        }
    }

    fn reply(self: Box<Self>, committed: Result<(), StoreError>) {
        let Self { output, reply, .. } = *self;
        let result = committed.and_then(|()| output.unwrap_or(Err(StoreError::WriterStopped)));
        // The caller may have given up waiting; the write stands anyway.
        let _ = reply.send(result);
    }
}

/// Where writes go.
#[derive(Debug, Clone)]
pub(crate) enum Writes {
    /// Each write in its own transaction (PostgreSQL).
    Direct(AnyPool),
    /// Queued to the group-commit writer task (SQLite).
    Batched(mpsc::Sender<Box<dyn Job>>),
}

impl Writes {
    /// Each write in its own transaction on `pool`.
    pub(crate) fn direct(pool: AnyPool) -> Self {
        Self::Direct(pool)
    }

    /// Starts the writer task on `pool`, committing up to `max_batch`
    /// writes per transaction. It ends when every sender is gone.
    pub(crate) fn batched(pool: AnyPool, max_batch: usize) -> Self {
        let (tx, rx) = mpsc::channel(QUEUE);
        tokio::spawn(run_writer(pool, rx, max_batch.max(1)));
        Self::Batched(tx)
    }

    /// Runs `write` and returns its output once it is committed.
    pub(crate) async fn run<W: Write>(&self, write: W) -> Result<W::Output, StoreError> {
        match self {
            Self::Direct(pool) if write.autocommit() => {
                let mut conn = pool.acquire().await?;
                write.run(&mut conn).await
            }
            Self::Direct(pool) => {
                let mut tx = pool.begin().await?;
                let output = write.run(&mut tx).await?;
                tx.commit().await?;
                Ok(output)
            }
            Self::Batched(queue) => {
                let (reply, answer) = oneshot::channel();
                let job: Box<dyn Job> = Box::new(Pending {
                    write,
                    output: None,
                    tail: None,
                    reply,
                });
                queue
                    .send(job)
                    .await
                    .map_err(|_| StoreError::WriterStopped)?;
                answer.await.map_err(|_| StoreError::WriterStopped)?
            }
        }
    }
}

/// How [`commit`] ends a transaction that succeeded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Then {
    /// `COMMIT`: the connection may go back to the pool.
    Close,
    /// `COMMIT; BEGIN` in one round trip: the writer keeps the connection,
    /// and its next batch starts inside the transaction this opens.
    Reopen,
}

/// What [`commit`] left on the connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Left {
    /// No transaction: the connection may run another batch after a `BEGIN`.
    Idle,
    /// An open transaction that has not read or written anything yet.
    Open,
    /// Nothing usable: the connection was closed.
    Broken,
}

/// Runs `jobs` in one transaction on `conn`, committed only if every one
/// succeeded; `open` says the connection is already inside a transaction
/// that has not run anything ([`Then::Reopen`] of the batch before).
///
/// On SQLite every query is a round trip to the connection's thread (two
/// thread wake-ups), so the writer, which keeps its connection, ends a
/// batch with `COMMIT; BEGIN` in one: a deferred transaction takes no lock
/// and no snapshot until its first statement, so the open one holds back
/// neither readers nor checkpoints while the writer waits. The last write's
/// last statements, when it leaves them unrun ([`Write::run_deferring`]),
/// go in that same query: a lone turn start is one round trip. The commit
/// counts only by its own result: a `BEGIN` that fails after it leaves the
/// connection idle, and the batch is committed.
///
/// A failed transaction is rolled back before the connection is used again
/// or goes back to the pool: left to the pool, a transaction whose COMMIT
/// failed (a full disk) kept SQLite's write lock on an idle connection and
/// every later write waited out the busy timeout. A connection that cannot
/// roll back is closed instead.
async fn commit(
    conn: &mut PoolConnection<Any>,
    jobs: &mut [Box<dyn Job>],
    open: bool,
    then: Then,
) -> (Result<(), StoreError>, Left) {
    let mut left = Left::Idle;
    let ran = async {
        if !open {
            sqlx::raw_sql("BEGIN").execute(&mut **conn).await?;
        }
        let last = jobs.len().saturating_sub(1);
        for (number, job) in jobs.iter_mut().enumerate() {
            job.run(conn, number == last).await?;
        }
        let tail = jobs.last_mut().and_then(|job| job.take_tail());
        let rows;
        (left, rows) = end(conn, tail, then).await?;
        if let Some(job) = jobs.last_mut() {
            job.tail_returned(&rows);
        }
        Ok(())
    }
    .await;
    if ran.is_err() {
        left = Left::Idle;
        if sqlx::raw_sql("ROLLBACK")
            .execute(&mut **conn)
            .await
            .is_err()
        {
            // Nothing to roll back (BEGIN failed), or the connection is
            // broken: either way it must not hold a transaction in the pool.
            conn.close_on_drop();
            left = Left::Broken;
        }
    }
    (ran, left)
}

/// Runs `tail` (a write's last statements) and ends the transaction as
/// `then` says; `Ok` once the `COMMIT` succeeded, with the rows the tail
/// returned. SQLite's statements go in one query with the `COMMIT` (and
/// the `BEGIN`).
async fn end(
    conn: &mut AnyConnection,
    tail: Option<Statements>,
    then: Then,
) -> Result<(Left, Vec<AnyRow>), StoreError> {
    let ending = match then {
        Then::Close => "COMMIT",
        Then::Reopen => "COMMIT;\nBEGIN",
    };
    let mut rows = Vec::new();
    let joined = match tail.map(Statements::into_joined) {
        Some(Ok(joined)) => joined,
        // PostgreSQL's: on their own, before the COMMIT.
        Some(Err(tail)) => {
            rows = tail.fetch_all(conn).await?;
            Joined::default()
        }
        None => Joined::default(),
    };
    let Joined {
        mut text,
        values,
        count,
    } = joined;
    if !text.is_empty() {
        text.push_str(";\n");
    }
    text.push_str(ending);
    // Each statement's end comes as a query result, in order: the
    // COMMIT's is the one after the tail's `count`, the BEGIN's the next.
    // (Several statements in one prepared query: SQLite's, as in
    // `group::Statements`.)
    #[allow(deprecated)]
    let mut results = sqlx::query_with(AssertSqlSafe(text), values).fetch_many(&mut *conn);
    let mut ended = 0;
    while let Some(result) = results.next().await {
        match result {
            Ok(Either::Left(_)) => ended += 1,
            // A row of the tail's statements (the COMMIT and BEGIN return
            // none).
            Ok(Either::Right(row)) => rows.push(row),
            // The BEGIN failed: the commit stands, the connection is idle.
            Err(_) if ended > count => return Ok((Left::Idle, rows)),
            Err(error) => return Err(error.into()),
        }
    }
    let left = match ended.checked_sub(count) {
        Some(2) if then == Then::Reopen => Left::Open,
        Some(1 | 2) => Left::Idle,
        _ => {
            return Err(StoreError::Database(sqlx::Error::Protocol(
                "the COMMIT did not report its end".into(),
            )));
        }
    };
    Ok((left, rows))
}

/// The SQLite writer's connection.
///
/// SQLite keeps a page cache per connection and empties it whenever another
/// connection has written since its last transaction. Taking whichever
/// connection the pool hands out, the writer read every page a write
/// touched again (a dozen `pread`s for each turn begun, once readers kept
/// other connections idle in the pool). So it keeps one connection while
/// the pool has others for the readers, and gives it back when the pool
/// closes or the connection breaks.
struct Connection {
    pool: AnyPool,
    /// Whether to keep the connection between batches: not when it is the
    /// pool's only one (an in-memory database).
    keep: bool,
    held: Option<PoolConnection<Any>>,
    /// The held connection is inside a transaction that has run nothing.
    open: bool,
}

impl Connection {
    fn new(pool: AnyPool, keep: bool) -> Self {
        Self {
            pool,
            keep,
            held: None,
            open: false,
        }
    }

    /// Runs `jobs` in one transaction (see [`commit`]).
    async fn commit(&mut self, jobs: &mut [Box<dyn Job>]) -> Result<(), StoreError> {
        let (mut conn, open) = match self.held.take() {
            Some(conn) => (conn, std::mem::take(&mut self.open)),
            None => (self.pool.acquire().await?, false),
        };
        let then = if self.keep { Then::Reopen } else { Then::Close };
        let (ran, left) = commit(&mut conn, jobs, open, then).await;
        if left != Left::Broken && self.keep && !self.pool.is_closed() {
            self.open = left == Left::Open;
            self.held = Some(conn);
        } else if left == Left::Open {
            // Not kept after all (the pool is closing): end the empty
            // transaction before the pool takes the connection back.
            let _ = sqlx::raw_sql("ROLLBACK").execute(&mut *conn).await;
        }
        ran
    }

    /// Gives the connection back once the pool closes, which waits for it.
    async fn release_on_close(&mut self) {
        if let Some(conn) = &mut self.held {
            self.pool.close_event().await;
            if std::mem::take(&mut self.open) {
                let _ = sqlx::raw_sql("ROLLBACK").execute(&mut **conn).await;
            }
            self.held = None;
        } else {
            std::future::pending::<()>().await;
        }
    }
}

/// Checkpoints of the WAL, run beside the writer.
///
/// SQLite checkpoints in the commit that takes the WAL past
/// `wal_autocheckpoint` pages: that commit copies the pages into the
/// database file and syncs both files (with `synchronous = NORMAL`), and
/// every write queued behind it waits — several times a second with a
/// hundred turns streaming. Here the writer's connection checkpoints only
/// past 10 000 pages ([`AUTOCHECKPOINT`]); every [`CHECKPOINT_EVERY`]
/// commits it asks this task, which runs a `PASSIVE` checkpoint on another
/// connection while the writer goes on committing. Durability is the
/// same: a commit is in the WAL either way.
struct Checkpoints {
    wanted: Arc<Notify>,
    commits: u32,
}

impl Checkpoints {
    /// Starts the task on `pool` (a WAL file with connections to spare);
    /// it ends when the pool closes.
    fn start(pool: AnyPool) -> Self {
        let wanted = Arc::new(Notify::new());
        tokio::spawn(checkpoint(pool, wanted.clone()));
        Self { wanted, commits: 0 }
    }

    fn committed(&mut self) {
        self.commits = self.commits.wrapping_add(1);
        if self.commits.is_multiple_of(CHECKPOINT_EVERY) {
            self.wanted.notify_one();
        }
    }
}

async fn checkpoint(pool: AnyPool, wanted: Arc<Notify>) {
    loop {
        tokio::select! {
            () = pool.close_event() => return,
            () = wanted.notified() => {}
        }
        if let Err(error) = sqlx::raw_sql("PRAGMA wal_checkpoint(PASSIVE)")
            .execute(&pool)
            .await
        {
            if pool.is_closed() {
                return;
            }
            // The writer's own checkpoints take over if this keeps failing.
            tracing::warn!(%error, "cannot checkpoint the write-ahead log");
        }
    }
}

async fn run_writer(pool: AnyPool, mut queue: mpsc::Receiver<Box<dyn Job>>, max_batch: usize) {
    // A file database (the pool has connections to spare): the writer keeps
    // one, and checkpoints run on another. An in-memory one has a single
    // connection and no WAL.
    let file = pool.options().get_max_connections() > 1;
    let mut checkpoints = file.then(|| Checkpoints::start(pool.clone()));
    let mut conn = Connection::new(pool, file);
    let mut batch = Vec::with_capacity(max_batch);
    loop {
        let received = tokio::select! {
            received = queue.recv_many(&mut batch, max_batch) => received,
            () = conn.release_on_close() => continue,
        };
        if received == 0 {
            break;
        }
        match conn.commit(&mut batch).await {
            Ok(()) => {
                if let Some(checkpoints) = &mut checkpoints {
                    checkpoints.committed();
                }
                for job in batch.drain(..) {
                    job.reply(Ok(()));
                }
            }
            Err(error) if batch.len() == 1 => {
                if let Some(job) = batch.pop() {
                    job.reply(Err(error));
                }
            }
            Err(error) => {
                tracing::debug!(%error, writes = batch.len(), "write batch failed; running its writes one by one");
                for mut job in batch.drain(..) {
                    let alone = conn.commit(std::slice::from_mut(&mut job)).await;
                    job.reply(alone);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests;
