//! Tests of `store::batch`.

use sqlx::{Arguments, any::AnyPoolOptions};

use super::*;

/// Inserts `id` into `t` (a duplicate id fails).
struct Insert(i64);

impl Write for Insert {
    type Output = i64;

    fn run<'c>(&'c self, conn: &'c mut AnyConnection) -> BoxFuture<'c, Result<i64, StoreError>> {
        Box::pin(async move {
            sqlx::query("INSERT INTO t (id) VALUES ($1)")
                .bind(self.0)
                .execute(conn)
                .await?;
            Ok(self.0)
        })
    }
}

/// Inserts its first id into `t`, and leaves the insert of its second
/// to run with the COMMIT.
struct Pair(i64, i64);

impl Write for Pair {
    type Output = (i64, i64);

    fn run<'c>(
        &'c self,
        conn: &'c mut AnyConnection,
    ) -> BoxFuture<'c, Result<(i64, i64), StoreError>> {
        Box::pin(run_whole(self, conn))
    }

    fn run_deferring<'c>(
        &'c self,
        conn: &'c mut AnyConnection,
    ) -> BoxFuture<'c, Result<Deferred<(i64, i64)>, StoreError>> {
        Box::pin(async move {
            Insert(self.0).run(conn).await?;
            let mut tail = Statements::new(conn);
            tail.push("INSERT INTO t (id) VALUES ($1)", |values| {
                values.add(self.1)
            })?;
            Ok(Deferred {
                output: Some((self.0, self.1)),
                tail: Some(tail),
            })
        })
    }
}

/// Inserts `id` with the COMMIT and replies with the id its
/// `RETURNING` gave back.
struct Returning(i64);

impl Write for Returning {
    type Output = i64;

    fn run<'c>(&'c self, conn: &'c mut AnyConnection) -> BoxFuture<'c, Result<i64, StoreError>> {
        Box::pin(run_whole(self, conn))
    }

    fn run_deferring<'c>(
        &'c self,
        conn: &'c mut AnyConnection,
    ) -> BoxFuture<'c, Result<Deferred<i64>, StoreError>> {
        Box::pin(async move {
            let mut tail = Statements::new(conn);
            tail.push("INSERT INTO t (id) VALUES ($1) RETURNING id", |values| {
                values.add(self.0)
            })?;
            Ok(Deferred {
                output: None,
                tail: Some(tail),
            })
        })
    }

    fn output_from(&self, rows: &[AnyRow]) -> Result<i64, StoreError> {
        use sqlx::Row;
        match rows {
            [row] => Ok(row.try_get("id")?),
            _ => Err(StoreError::WriterStopped),
        }
    }
}

async fn pool() -> (tempfile::TempDir, AnyPool) {
    sqlx::any::install_default_drivers();
    let dir = tempfile::tempdir().expect("temp dir");
    let url = format!("sqlite://{}?mode=rwc", dir.path().join("b.db").display());
    let pool = AnyPoolOptions::new()
        .max_connections(2)
        .connect(&url)
        .await
        .expect("open");
    sqlx::query("CREATE TABLE t (id BIGINT PRIMARY KEY)")
        .execute(&pool)
        .await
        .expect("create");
    (dir, pool)
}

/// Inserts `id` into `t` outside the writer.
async fn seed(pool: &AnyPool, id: i64) {
    sqlx::query("INSERT INTO t (id) VALUES ($1)")
        .bind(id)
        .execute(pool)
        .await
        .expect("seed");
}

async fn stored(pool: &AnyPool) -> Vec<i64> {
    use sqlx::Row;
    sqlx::query("SELECT id FROM t ORDER BY id")
        .fetch_all(pool)
        .await
        .expect("select")
        .iter()
        .map(|row| row.try_get::<i64, _>("id").expect("id"))
        .collect()
}

// On this single-threaded runtime the writer task runs only once every
// write below has queued, so they share one batch.
#[tokio::test]
async fn a_failing_write_does_not_fail_the_others_of_its_batch() {
    let (_dir, pool) = pool().await;
    seed(&pool, 2).await;
    let writes = Writes::batched(pool.clone(), 16);
    let (one, two, three) = tokio::join!(
        writes.run(Insert(1)),
        writes.run(Insert(2)),
        writes.run(Insert(3))
    );
    assert_eq!(one.expect("1 stored"), 1);
    assert!(matches!(two, Err(StoreError::Database(_))), "{two:?}");
    assert_eq!(three.expect("3 stored"), 3);
    assert_eq!(stored(&pool).await, vec![1, 2, 3]);
}

#[tokio::test]
async fn the_last_write_s_tail_commits_with_its_batch() {
    let (_dir, pool) = pool().await;
    let writes = Writes::batched(pool.clone(), 16);
    assert_eq!(writes.run(Pair(1, 2)).await.expect("alone"), (1, 2));
    let (three, four, six) = tokio::join!(
        writes.run(Pair(3, 30)),
        writes.run(Insert(4)),
        writes.run(Pair(6, 60))
    );
    assert_eq!(three.expect("first of the batch"), (3, 30));
    assert_eq!(four.expect("second"), 4);
    assert_eq!(six.expect("last, its tail deferred"), (6, 60));
    // The batch after runs in the transaction the last one opened.
    assert_eq!(writes.run(Insert(7)).await.expect("after"), 7);
    assert_eq!(stored(&pool).await, vec![1, 2, 3, 4, 6, 7, 30, 60]);
}

#[tokio::test]
async fn a_failing_tail_fails_only_its_own_write_and_all_of_it() {
    let (_dir, pool) = pool().await;
    seed(&pool, 5).await;
    let writes = Writes::batched(pool.clone(), 16);
    let (one, pair) = tokio::join!(writes.run(Insert(1)), writes.run(Pair(4, 5)));
    assert_eq!(one.expect("1 stored"), 1);
    assert!(matches!(pair, Err(StoreError::Database(_))), "{pair:?}");
    // Alone, too: the tail fails in the COMMIT's query and the rest of
    // the write is rolled back with it.
    let alone = writes.run(Pair(8, 5)).await;
    assert!(matches!(alone, Err(StoreError::Database(_))), "{alone:?}");
    assert_eq!(writes.run(Insert(9)).await.expect("the writer goes on"), 9);
    assert_eq!(stored(&pool).await, vec![1, 5, 9]);
}

#[tokio::test]
async fn a_write_reads_its_output_from_the_rows_its_tail_returns() {
    let (_dir, pool) = pool().await;
    seed(&pool, 5).await;
    let writes = Writes::batched(pool.clone(), 16);
    assert_eq!(writes.run(Returning(1)).await.expect("alone"), 1);
    // Not last in its batch: its tail runs before the next write.
    let (two, three, four) = tokio::join!(
        writes.run(Returning(2)),
        writes.run(Insert(3)),
        writes.run(Returning(4))
    );
    assert_eq!(two.expect("first of the batch"), 2);
    assert_eq!(three.expect("second"), 3);
    assert_eq!(four.expect("last, its tail with the COMMIT"), 4);
    // A tail that fails fails its own write only, alone as in a batch.
    let (six, five) = tokio::join!(writes.run(Insert(6)), writes.run(Returning(5)));
    assert_eq!(six.expect("6 stored"), 6);
    assert!(matches!(five, Err(StoreError::Database(_))), "{five:?}");
    // Run directly, as on PostgreSQL, the tail runs before the COMMIT.
    let direct = Writes::direct(pool.clone());
    assert_eq!(direct.run(Returning(7)).await.expect("direct"), 7);
    assert_eq!(stored(&pool).await, vec![1, 2, 3, 4, 5, 6, 7]);
}

#[tokio::test]
async fn many_queued_writes_commit_in_batches_and_all_reply() {
    let (_dir, pool) = pool().await;
    let writes = Writes::batched(pool.clone(), 8);
    let results = futures::future::join_all((0..100).map(|id| writes.run(Insert(id)))).await;
    let ids: Vec<i64> = results
        .into_iter()
        .map(|result| result.expect("stored"))
        .collect();
    assert_eq!(ids, (0..100).collect::<Vec<_>>());
    assert_eq!(stored(&pool).await, (0..100).collect::<Vec<_>>());
}

/// The `n` that `query` selects.
async fn count(conn: &mut AnyConnection, query: &'static str) -> Result<i64, StoreError> {
    use sqlx::Row;
    let row = sqlx::query(query).fetch_one(&mut *conn).await?;
    Ok(row.try_get("n")?)
}

/// Counts the rows of `t`, inside the write's transaction.
struct CountRows;

impl Write for CountRows {
    type Output = i64;

    fn run<'c>(&'c self, conn: &'c mut AnyConnection) -> BoxFuture<'c, Result<i64, StoreError>> {
        Box::pin(count(conn, "SELECT count(*) AS n FROM t"))
    }
}

// After a batch the writer waits inside the transaction its commit
// opened (`COMMIT; BEGIN`): it must hold no lock and no snapshot, so
// other connections write meanwhile and its next batch sees them.
#[tokio::test]
async fn the_transaction_a_commit_opens_holds_nothing_until_the_next_batch() {
    let (_dir, pool) = pool().await;
    let writes = Writes::batched(pool.clone(), 4);
    assert_eq!(writes.run(Insert(1)).await.expect("1 stored"), 1);
    // Another connection takes the write lock and commits: it would
    // wait out the busy timeout behind a lock.
    tokio::time::timeout(
        std::time::Duration::from_secs(2),
        sqlx::query("INSERT INTO t (id) VALUES (2)").execute(&pool),
    )
    .await
    .expect("the writer holds no lock")
    .expect("another connection writes");
    assert_eq!(writes.run(CountRows).await.expect("counted"), 2);
    assert_eq!(writes.run(Insert(3)).await.expect("3 stored"), 3);
    // And a failed batch leaves the writer able to go on.
    assert!(writes.run(Insert(3)).await.is_err());
    assert_eq!(writes.run(Insert(4)).await.expect("4 stored"), 4);
    assert_eq!(stored(&pool).await, vec![1, 2, 3, 4]);
}

/// Counts the writes run on the connection it runs on: a temporary
/// table exists once per connection.
struct CountOnConnection;

impl Write for CountOnConnection {
    type Output = i64;

    fn run<'c>(&'c self, conn: &'c mut AnyConnection) -> BoxFuture<'c, Result<i64, StoreError>> {
        Box::pin(async move {
            sqlx::raw_sql(
                "CREATE TEMP TABLE IF NOT EXISTS ran (n BIGINT); INSERT INTO ran VALUES (1)",
            )
            .execute(&mut *conn)
            .await?;
            count(conn, "SELECT count(*) AS n FROM ran").await
        })
    }
}

#[tokio::test]
async fn the_writer_keeps_its_connection_and_readers_use_the_others() {
    let (_dir, pool) = pool().await;
    // Both of the pool's connections open and idle: taking whatever the
    // pool hands out, one write after another alternates between them.
    let (a, b) = tokio::join!(pool.acquire(), pool.acquire());
    drop((a.expect("a"), b.expect("b")));
    let writes = Writes::batched(pool.clone(), 1);
    let mut counts = Vec::new();
    for _ in 0..4 {
        counts.push(writes.run(CountOnConnection).await.expect("write"));
    }
    // Readers still have a connection.
    assert_eq!(stored(&pool).await, Vec::<i64>::new());
    assert_eq!(counts, vec![1, 2, 3, 4]);
    // Closing the pool gets the writer's connection back (close waits
    // for every connection), and later writes fail.
    tokio::time::timeout(std::time::Duration::from_secs(5), pool.close())
        .await
        .expect("the pool closes");
    assert!(writes.run(Insert(1)).await.is_err());
}

/// Stores a 64 KiB blob under `id`.
struct Blob(i64);

impl Write for Blob {
    type Output = ();

    fn run<'c>(&'c self, conn: &'c mut AnyConnection) -> BoxFuture<'c, Result<(), StoreError>> {
        Box::pin(async move {
            sqlx::query("INSERT INTO blobs (id, data) VALUES ($1, $2)")
                .bind(self.0)
                .bind(vec![7_u8; 64 * 1024])
                .execute(conn)
                .await?;
            Ok(())
        })
    }
}

#[tokio::test]
async fn the_wal_is_checkpointed_beside_the_writer() {
    sqlx::any::install_default_drivers();
    let dir = tempfile::tempdir().expect("temp dir");
    let file = dir.path().join("w.db");
    let pool = AnyPoolOptions::new()
        .max_connections(2)
        .after_connect(|connection, _| {
            Box::pin(async move {
                sqlx::raw_sql(AUTOCHECKPOINT).execute(connection).await?;
                Ok(())
            })
        })
        .connect(&format!("sqlite://{}?mode=rwc", file.display()))
        .await
        .expect("open");
    sqlx::raw_sql(
        "PRAGMA journal_mode = WAL; CREATE TABLE blobs (id BIGINT PRIMARY KEY, data BLOB)",
    )
    .execute(&pool)
    .await
    .expect("create");
    let before = std::fs::metadata(&file).expect("db file").len();
    let writes = Writes::batched(pool.clone(), 1);
    for id in 0..i64::from(CHECKPOINT_EVERY) {
        writes.run(Blob(id)).await.expect("stored");
    }
    // 2 MiB went to the WAL, far below the writer's own checkpoint
    // (10 000 pages): only the checkpoint beside it copies them into
    // the database file.
    let grown = async {
        while std::fs::metadata(&file).expect("db file").len() < before + 2 * 1024 * 1024 {
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
    };
    tokio::time::timeout(std::time::Duration::from_secs(10), grown)
        .await
        .expect("the WAL was checkpointed into the database file");
    pool.close().await;
}

#[tokio::test]
async fn direct_writes_commit_each_on_its_own() {
    let (_dir, pool) = pool().await;
    let writes = Writes::direct(pool.clone());
    assert_eq!(writes.run(Insert(7)).await.expect("stored"), 7);
    assert!(writes.run(Insert(7)).await.is_err());
    assert_eq!(stored(&pool).await, vec![7]);
}
