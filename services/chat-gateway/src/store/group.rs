//! Statements of one write that do not depend on one another's results,
//! sent together.
//!
//! On SQLite every statement is a round trip to the connection's thread
//! (a wake-up there and one back), so a [`Statements`] runs as one query:
//! the statements joined with `;`, their values bound in order across them
//! (sqlx binds a `$n` placeholder to the query's `n`th value, so each
//! statement's placeholders are moved on past the values before it); they
//! run one after the other, each seeing what the ones before it wrote.
//!
//! On PostgreSQL the extended protocol binds values to one statement per
//! query, and every query is a round trip to the server. Statements that
//! return no rows are joined into one statement, the ones before the last
//! as data-modifying `WITH` queries (`WITH s1 AS (INSERT ...), s2 AS
//! (INSERT ...) INSERT ...`). PostgreSQL runs those together on one
//! snapshot, in no set order, and checks foreign keys at the statement's
//! end: a statement that must see another's effect (the same row, or the
//! same unique key freed first) goes after [`Statements::then`], which
//! starts the next statement. A statement with `RETURNING` runs as one of
//! its own, so the rows of every statement come back.
//!
//! Only for statements that do not depend on one another's results: the
//! group reports the first error, or the rows every statement returned (a
//! `RETURNING` clause), in order.

use std::borrow::Cow;

use sqlx::{
    AnyConnection, Arguments, AssertSqlSafe,
    any::{AnyArguments, AnyRow},
    error::BoxDynError,
};

use super::StoreError;

/// Whether `conn` is SQLite's (values bound in text order, statements
/// joined into one query).
pub(crate) fn is_sqlite(conn: &AnyConnection) -> bool {
    conn.backend_name() == <sqlx::Sqlite as sqlx::Database>::NAME
}

/// The store's clock, as SQL: Unix ms now on the database server (on
/// SQLite, the one process's clock). Every lease is written and compared
/// on it, so replicas whose own clocks disagree agree on whose lease
/// expired. PostgreSQL's `clock_timestamp()`, not `now()`: a transaction
/// that waited for a lock compares with the time it runs, not the time it
/// began.
pub(crate) fn clock_sql(conn: &AnyConnection) -> &'static str {
    if is_sqlite(conn) {
        "CAST(unixepoch('subsec') * 1000 AS INTEGER)"
    } else {
        "CAST(EXTRACT(EPOCH FROM clock_timestamp()) * 1000 AS BIGINT)"
    }
}

/// `sql` with every `{now}` read on the store's clock ([`clock_sql`]).
pub(crate) fn on_store_clock(conn: &AnyConnection, sql: &str) -> String {
    sql.replace("{now}", clock_sql(conn))
}

/// Statements run together (see the module).
pub(crate) enum Statements {
    /// SQLite: one query.
    Joined {
        /// The statements, joined with `;`.
        text: String,
        /// Every statement's values, in order.
        values: AnyArguments,
        /// Whether a statement with numbered placeholders is among them.
        numbered: bool,
        /// How many statements.
        count: usize,
    },
    /// PostgreSQL: one statement per [`Together`], in order.
    Each(Vec<Together>),
}

/// SQLite's statements as one query ([`Statements::into_joined`]).
#[derive(Default)]
pub(crate) struct Joined {
    /// The statements, joined with `;` (empty: none).
    pub(crate) text: String,
    /// Every statement's values, in order.
    pub(crate) values: AnyArguments,
    /// How many statements.
    pub(crate) count: usize,
}

/// PostgreSQL statements run as one (see the module).
#[derive(Default)]
pub(crate) struct Together {
    /// Each statement, its placeholders moved on past the values before it.
    statements: Vec<String>,
    /// Every statement's values, in order.
    values: AnyArguments,
    /// Whether nothing more may join: a `RETURNING` statement, or
    /// [`Statements::then`] was called.
    closed: bool,
}

impl Together {
    /// The one statement: the last, the ones before it as `WITH` queries.
    fn text(&self) -> Cow<'_, str> {
        let Some((last, before)) = self.statements.split_last() else {
            return Cow::Borrowed("");
        };
        if before.is_empty() {
            return Cow::Borrowed(last);
        }
        let mut text = String::from("WITH ");
        for (number, statement) in before.iter().enumerate() {
            if number > 0 {
                text.push_str(", ");
            }
            text.push_str(&format!("s{number} AS ({statement})"));
        }
        text.push(' ');
        text.push_str(last);
        Cow::Owned(text)
    }
}

impl Statements {
    /// No statements yet, for the backend of `conn`.
    pub(crate) fn new(conn: &AnyConnection) -> Self {
        if is_sqlite(conn) {
            Self::Joined {
                text: String::new(),
                values: AnyArguments::default(),
                numbered: false,
                count: 0,
            }
        } else {
            Self::Each(Vec::new())
        }
    }

    /// Adds `sql`, whose placeholders are `$1`, `$2`... as if it ran alone
    /// (or anonymous `?` on SQLite), with the values `bind` adds in that
    /// order. `sql` is the store's own text: every value is bound, none is
    /// spliced in, and it holds no `$` or `?` but its placeholders.
    ///
    /// SQLite counts anonymous placeholders on from the last anonymous one,
    /// not past numbered ones: a statement with `?` cannot follow one with
    /// `$n` in a group (refused).
    pub(crate) fn push(
        &mut self,
        sql: impl Into<Cow<'static, str>>,
        bind: impl FnOnce(&mut AnyArguments) -> Result<(), BoxDynError>,
    ) -> Result<(), StoreError> {
        let sql = sql.into();
        let encode = |error| StoreError::Database(sqlx::Error::Encode(error));
        match self {
            Self::Joined {
                text,
                values,
                numbered,
                count,
            } => {
                if sql.contains('?') {
                    if *numbered {
                        return Err(StoreError::Database(sqlx::Error::Protocol(
                            "a statement with anonymous placeholders after numbered ones".into(),
                        )));
                    }
                } else {
                    *numbered |= sql.contains('$');
                }
                if !text.is_empty() {
                    text.push_str(";\n");
                }
                text.push_str(&renumber(&sql, values.len()));
                *count += 1;
                bind(values).map_err(encode)
            }
            Self::Each(groups) => {
                let returns_rows = sql.contains("RETURNING");
                let open = groups
                    .last()
                    .is_some_and(|group| !group.closed && !returns_rows);
                if !open {
                    groups.push(Together::default());
                }
                let last = groups.len() - 1;
                let group = &mut groups[last];
                group.statements.push(renumber(&sql, group.values.len()));
                group.closed = returns_rows;
                bind(&mut group.values).map_err(encode)
            }
        }
    }

    /// The statements pushed after this run after the ones before it
    /// (PostgreSQL: in the next statement; SQLite: in order, as always).
    pub(crate) fn then(&mut self) {
        if let Self::Each(groups) = self
            && let Some(group) = groups.last_mut()
        {
            group.closed = true;
        }
    }

    /// How many queries the statements take (one on SQLite).
    #[cfg(test)]
    pub(crate) fn queries(&self) -> usize {
        match self {
            Self::Joined { .. } => 1,
            Self::Each(groups) => groups.len(),
        }
    }

    /// Whether the statements run as one query (SQLite), where a
    /// statement's values may bind in text order (anonymous `?`).
    pub(crate) fn is_joined(&self) -> bool {
        matches!(self, Self::Joined { .. })
    }

    /// The statements as SQLite's one query, to run with more after them;
    /// `Err(self)` on PostgreSQL.
    pub(crate) fn into_joined(self) -> Result<Joined, Self> {
        match self {
            Self::Joined {
                text,
                values,
                count,
                ..
            } => Ok(Joined {
                text,
                values,
                count,
            }),
            each @ Self::Each(_) => Err(each),
        }
    }

    /// Runs the statements, stopping at the first that fails, and returns
    /// the rows they returned, in order.
    pub(crate) async fn fetch_all(
        self,
        conn: &mut AnyConnection,
    ) -> Result<Vec<AnyRow>, StoreError> {
        match self {
            Self::Joined { text, .. } if text.is_empty() => Ok(Vec::new()),
            // The store's own statement text with placeholders (hence
            // `AssertSqlSafe`): every value is bound.
            Self::Joined { text, values, .. } => Ok(sqlx::query_with(AssertSqlSafe(text), values)
                .fetch_all(&mut *conn)
                .await?),
            Self::Each(groups) => {
                let mut rows = Vec::new();
                for group in groups {
                    let text = group.text().into_owned();
                    rows.extend(
                        sqlx::query_with(AssertSqlSafe(text), group.values)
                            .fetch_all(&mut *conn)
                            .await?,
                    );
                }
                Ok(rows)
            }
        }
    }
}

/// `sql` with every `$n` placeholder moved on by `by` (`$1` → `$(1 + by)`).
/// The statements are the store's own text, which holds no `$` elsewhere.
fn renumber(sql: &str, by: usize) -> String {
    if by == 0 {
        return sql.to_owned();
    }
    let mut out = String::with_capacity(sql.len() + 16);
    let mut rest = sql;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..=at]);
        rest = &rest[at + 1..];
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        match rest[..digits].parse::<usize>() {
            Ok(number) => out.push_str(&(number + by).to_string()),
            Err(_) => out.push_str(&rest[..digits]),
        }
        rest = &rest[digits..];
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use sqlx::{AnyPool, Row, any::AnyPoolOptions};

    use super::*;

    #[test]
    fn placeholders_move_on_past_the_values_before() {
        assert_eq!(
            renumber("VALUES ($1, $2, $2, $10)", 3),
            "VALUES ($4, $5, $5, $13)"
        );
        assert_eq!(renumber("VALUES ($1)", 0), "VALUES ($1)");
        assert_eq!(renumber("no placeholders", 5), "no placeholders");
    }

    async fn sqlite() -> (tempfile::TempDir, AnyPool) {
        sqlx::any::install_default_drivers();
        let dir = tempfile::tempdir().expect("temp dir");
        let url = format!("sqlite://{}?mode=rwc", dir.path().join("g.db").display());
        let pool = AnyPoolOptions::new()
            .max_connections(1)
            .connect(&url)
            .await
            .expect("open");
        sqlx::raw_sql(
            "CREATE TABLE a (id BIGINT PRIMARY KEY, name TEXT NOT NULL, again TEXT NOT NULL); \
             CREATE TABLE b (id BIGINT PRIMARY KEY, note TEXT)",
        )
        .execute(&pool)
        .await
        .expect("create");
        (dir, pool)
    }

    /// The `id` column of `rows`.
    fn ids(rows: &[AnyRow]) -> Vec<i64> {
        rows.iter()
            .map(|row| row.try_get("id").expect("id"))
            .collect()
    }

    fn two(conn: &AnyConnection, id: i64) -> Statements {
        let mut group = Statements::new(conn);
        group
            .push("INSERT INTO a (id, name, again) VALUES ($1, $2, $2)", |v| {
                v.add(id)?;
                v.add("first")
            })
            .expect("bound");
        group
            .push("INSERT INTO b (id, note) VALUES ($1, $2)", |v| {
                v.add(id * 10)?;
                v.add(None::<String>)
            })
            .expect("bound");
        group
    }

    #[tokio::test]
    async fn joined_statements_bind_each_its_own_values() {
        let (_dir, pool) = sqlite().await;
        let mut conn = pool.acquire().await.expect("connection");
        let mut group = two(&conn, 1);
        group.then();
        assert!(group.is_joined());
        assert_eq!(group.queries(), 1);
        group.fetch_all(&mut conn).await.expect("ran");
        let a = sqlx::query("SELECT id, name, again FROM a")
            .fetch_one(&mut *conn)
            .await
            .expect("a");
        assert_eq!(a.try_get::<i64, _>("id").expect("id"), 1);
        assert_eq!(a.try_get::<String, _>("name").expect("name"), "first");
        assert_eq!(a.try_get::<String, _>("again").expect("again"), "first");
        let b = sqlx::query("SELECT id, note FROM b")
            .fetch_one(&mut *conn)
            .await
            .expect("b");
        assert_eq!(b.try_get::<i64, _>("id").expect("id"), 10);
        assert_eq!(b.try_get::<Option<String>, _>("note").expect("note"), None);
    }

    #[tokio::test]
    async fn the_rows_of_every_statement_come_back_in_order() {
        let (_dir, pool) = sqlite().await;
        let mut conn = pool.acquire().await.expect("connection");
        two(&conn, 3).fetch_all(&mut conn).await.expect("seeded");
        let mut group = Statements::new(&conn);
        group
            .push(
                String::from("INSERT INTO b (id, note) VALUES (?, ?)"),
                |v| {
                    v.add(4_i64)?;
                    v.add("anonymous")
                },
            )
            .expect("bound");
        group
            .push("UPDATE a SET name = $1 WHERE id = $2 RETURNING id", |v| {
                v.add("second")?;
                v.add(3_i64)
            })
            .expect("bound");
        group
            .push("SELECT id FROM b WHERE note = $1", |v| v.add("anonymous"))
            .expect("bound");
        // SQLite would bind it from the first value on.
        assert!(
            group
                .push("SELECT id FROM b WHERE id = ?", |v| v.add(4_i64))
                .is_err()
        );
        let ids = ids(&group.fetch_all(&mut conn).await.expect("ran"));
        assert_eq!(ids, [3, 4]);
        let name = sqlx::query("SELECT name FROM a WHERE id = 3")
            .fetch_one(&mut *conn)
            .await
            .expect("a");
        assert_eq!(name.try_get::<String, _>("name").expect("name"), "second");
    }

    #[tokio::test]
    async fn a_failing_statement_fails_the_group_and_stops_it() {
        let (_dir, pool) = sqlite().await;
        let mut conn = pool.acquire().await.expect("connection");
        sqlx::query("INSERT INTO a (id, name, again) VALUES (2, 'x', 'x')")
            .execute(&mut *conn)
            .await
            .expect("seed");
        // The first statement meets the duplicate id: the second never runs.
        assert!(two(&conn, 2).fetch_all(&mut conn).await.is_err());
        let rows = sqlx::query("SELECT count(*) AS n FROM b")
            .fetch_one(&mut *conn)
            .await
            .expect("count");
        assert_eq!(rows.try_get::<i64, _>("n").expect("n"), 0);
    }

    /// A pool on a fresh PostgreSQL schema with the tables of [`sqlite`]
    /// and a child table, or `None` (a loud line) outside CI without one.
    async fn postgres(test: &str) -> Option<(AnyPool, String)> {
        let (url, schema) = crate::store::tests::test_postgres::fresh_schema(test).await?;
        sqlx::any::install_default_drivers();
        let pool = AnyPoolOptions::new()
            .max_connections(1)
            .connect(&url)
            .await
            .expect("connect");
        sqlx::raw_sql(
            "CREATE TABLE a (id BIGINT PRIMARY KEY, name TEXT NOT NULL, again TEXT NOT NULL); \
             CREATE TABLE b (id BIGINT PRIMARY KEY, note TEXT); \
             CREATE TABLE c (id BIGINT PRIMARY KEY, a_id BIGINT NOT NULL REFERENCES a (id), \
             tag TEXT UNIQUE)",
        )
        .execute(&pool)
        .await
        .expect("create");
        Some((pool, schema))
    }

    async fn count(conn: &mut AnyConnection, table: &str) -> i64 {
        sqlx::query(AssertSqlSafe(format!("SELECT count(*) AS n FROM {table}")))
            .fetch_one(&mut *conn)
            .await
            .expect("count")
            .try_get("n")
            .expect("n")
    }

    #[tokio::test]
    async fn postgres_runs_statements_that_return_nothing_as_one() {
        let Some((pool, schema)) =
            postgres("group::postgres_runs_statements_that_return_nothing_as_one").await
        else {
            return;
        };
        let mut conn = pool.acquire().await.expect("connection");
        let mut group = two(&conn, 1);
        // A child of the row the same statement inserts: the foreign key
        // is checked at the statement's end.
        group
            .push("INSERT INTO c (id, a_id, tag) VALUES ($1, $2, $3)", |v| {
                v.add(7_i64)?;
                v.add(1_i64)?;
                v.add("seven")
            })
            .expect("bound");
        assert!(!group.is_joined());
        assert_eq!(group.queries(), 1);
        group.fetch_all(&mut conn).await.expect("ran");
        let a = sqlx::query("SELECT name, again FROM a WHERE id = 1")
            .fetch_one(&mut *conn)
            .await
            .expect("a");
        assert_eq!(a.try_get::<String, _>("again").expect("again"), "first");
        let b = sqlx::query("SELECT id, note FROM b")
            .fetch_one(&mut *conn)
            .await
            .expect("b");
        assert_eq!(b.try_get::<i64, _>("id").expect("id"), 10);
        assert_eq!(count(&mut conn, "c").await, 1);

        // One failing statement fails them all: nothing of it is written.
        let mut group = two(&conn, 2);
        group
            .push("INSERT INTO c (id, a_id, tag) VALUES ($1, $2, $3)", |v| {
                v.add(8_i64)?;
                v.add(2_i64)?;
                v.add("seven")
            })
            .expect("bound");
        assert!(group.fetch_all(&mut conn).await.is_err());
        assert_eq!(count(&mut conn, "a").await, 1);
        assert_eq!(count(&mut conn, "b").await, 1);
        drop(conn);
        pool.close().await;
        crate::store::tests::test_postgres::drop_schema(&schema).await;
    }

    #[tokio::test]
    async fn postgres_runs_what_follows_then_and_returning_on_its_own() {
        let Some((pool, schema)) =
            postgres("group::postgres_runs_what_follows_then_and_returning_on_its_own").await
        else {
            return;
        };
        let mut conn = pool.acquire().await.expect("connection");
        two(&conn, 3).fetch_all(&mut conn).await.expect("seeded");
        sqlx::query("INSERT INTO c (id, a_id, tag) VALUES (1, 3, 'taken')")
            .execute(&mut *conn)
            .await
            .expect("seed c");
        let mut group = Statements::new(&conn);
        // The unique tag is freed first, then taken by the new row.
        group
            .push("UPDATE c SET tag = NULL WHERE tag = $1", |v| v.add("taken"))
            .expect("bound");
        group.then();
        group
            .push("INSERT INTO c (id, a_id, tag) VALUES ($1, $2, $3)", |v| {
                v.add(2_i64)?;
                v.add(3_i64)?;
                v.add("taken")
            })
            .expect("bound");
        group
            .push("UPDATE a SET name = $1 WHERE id = $2 RETURNING id", |v| {
                v.add("second")?;
                v.add(3_i64)
            })
            .expect("bound");
        group
            .push("UPDATE b SET note = $1 WHERE id = $2 RETURNING id", |v| {
                v.add("noted")?;
                v.add(30_i64)
            })
            .expect("bound");
        assert_eq!(group.queries(), 4);
        let ids = ids(&group.fetch_all(&mut conn).await.expect("ran"));
        assert_eq!(ids, [3, 30]);
        let tag = sqlx::query("SELECT tag FROM c WHERE id = 2")
            .fetch_one(&mut *conn)
            .await
            .expect("c");
        assert_eq!(tag.try_get::<String, _>("tag").expect("tag"), "taken");
        drop(conn);
        pool.close().await;
        crate::store::tests::test_postgres::drop_schema(&schema).await;
    }
}
