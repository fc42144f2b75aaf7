//! The two migration trees produce one schema: a database migrated on SQLite and one
//! migrated on PostgreSQL hold the same tables, columns (types up to the dialect,
//! nullability, primary keys) and indexes (name, uniqueness, columns; a unique
//! constraint's index by its columns, since each engine names those itself) and
//! foreign keys (columns, the table and columns they reference, what a delete does);
//! and both trees number their migrations alike: one number, one name, one change.

use std::collections::{BTreeMap, BTreeSet};

use sqlx::Row;

use super::*;

/// One table as both engines can describe it.
#[derive(Debug, Default, PartialEq, Eq)]
struct Table {
    /// Column: (type up to the dialect, NOT NULL or part of the primary key).
    columns: BTreeMap<String, (String, bool)>,
    primary_key: Vec<String>,
    /// Named indexes: (unique, columns; `<expr>` for an expression).
    indexes: BTreeMap<String, (bool, Vec<String>)>,
    /// The columns of each unique constraint (its index is named by the engine).
    unique_constraints: BTreeSet<Vec<String>>,
    /// Foreign keys: (columns, referenced table, referenced columns, on delete).
    foreign_keys: BTreeSet<(Vec<String>, String, Vec<String>, String)>,
}

type Schema = BTreeMap<String, Table>;

/// A column type as both dialects mean it: integers of any width are integers.
fn canonical(declared: &str) -> String {
    match declared.to_ascii_lowercase().as_str() {
        "integer" | "bigint" | "int" | "int8" | "int4" | "smallint" => "integer".to_owned(),
        "blob" | "bytea" => "bytes".to_owned(),
        "text" | "character varying" | "varchar" => "text".to_owned(),
        other => other.to_owned(),
    }
}

async fn sqlite_schema(store: &Store) -> Schema {
    let pool = adapters::storage::pool_for_tests(store);
    let tables: Vec<String> = sqlx::query_scalar(
        "SELECT name FROM sqlite_master WHERE type = 'table'
         AND name NOT LIKE 'sqlite_%' AND name NOT LIKE '_sqlx%' ORDER BY name",
    )
    .fetch_all(pool)
    .await
    .unwrap();
    let mut schema = Schema::new();
    for name in tables {
        let mut table = Table::default();
        let columns = sqlx::query(&format!(
            "SELECT name, type, \"notnull\" AS not_null, pk FROM pragma_table_info('{name}') ORDER BY pk, cid"
        ))
        .fetch_all(pool)
        .await
        .unwrap();
        for row in columns {
            let column: String = row.get("name");
            let pk: i64 = row.get("pk");
            let not_null: i64 = row.get("not_null");
            if pk > 0 {
                table.primary_key.push(column.clone());
            }
            let declared: String = row.get("type");
            table
                .columns
                .insert(column, (canonical(&declared), not_null == 1 || pk > 0));
        }
        let indexes = sqlx::query(&format!(
            "SELECT name, \"unique\" AS is_unique, origin FROM pragma_index_list('{name}')"
        ))
        .fetch_all(pool)
        .await
        .unwrap();
        for row in indexes {
            let index: String = row.get("name");
            let unique: i64 = row.get("is_unique");
            let origin: String = row.get("origin");
            let columns: Vec<Option<String>> = sqlx::query_scalar(&format!(
                "SELECT name FROM pragma_index_info('{index}') ORDER BY seqno"
            ))
            .fetch_all(pool)
            .await
            .unwrap();
            let columns: Vec<String> = columns
                .into_iter()
                .map(|c| c.unwrap_or_else(|| "<expr>".to_owned()))
                .collect();
            match origin.as_str() {
                "pk" => {}
                "u" => {
                    table.unique_constraints.insert(columns);
                }
                _ => {
                    table.indexes.insert(index, (unique == 1, columns));
                }
            }
        }
        let keys = sqlx::query(&format!(
            "SELECT id, \"table\" AS target, \"from\" AS source, \"to\" AS referenced, on_delete
             FROM pragma_foreign_key_list('{name}') ORDER BY id, seq"
        ))
        .fetch_all(pool)
        .await
        .unwrap();
        let mut by_id: BTreeMap<i64, (Vec<String>, String, Vec<String>, String)> = BTreeMap::new();
        for row in keys {
            let key = by_id.entry(row.get("id")).or_default();
            key.0.push(row.get("source"));
            key.1 = row.get("target");
            // No referenced column: the referenced table's primary key (filled below).
            key.2.push(
                row.get::<Option<String>, _>("referenced")
                    .unwrap_or_default(),
            );
            key.3 = row.get("on_delete");
        }
        table.foreign_keys = by_id.into_values().collect();
        schema.insert(name, table);
    }
    // A reference that names no column means the referenced table's primary key.
    let keys: BTreeMap<String, Vec<String>> = schema
        .iter()
        .map(|(name, table)| (name.clone(), table.primary_key.clone()))
        .collect();
    for table in schema.values_mut() {
        table.foreign_keys = std::mem::take(&mut table.foreign_keys)
            .into_iter()
            .map(|(columns, target, referenced, on_delete)| {
                let referenced = if referenced.iter().all(String::is_empty) {
                    keys.get(&target).cloned().unwrap_or(referenced)
                } else {
                    referenced
                };
                (columns, target, referenced, on_delete)
            })
            .collect();
    }
    schema
}

async fn postgres_schema(store: &Store) -> Schema {
    let pool = adapters::storage::pool_for_tests(store);
    let columns = sqlx::query(
        "SELECT table_name::text AS t, column_name::text AS c, data_type::text AS ty, is_nullable::text AS n
         FROM information_schema.columns WHERE table_schema = 'public' AND table_name NOT LIKE '\\_sqlx%'
         ORDER BY table_name, ordinal_position",
    )
    .fetch_all(pool)
    .await
    .unwrap();
    let mut schema = Schema::new();
    for row in columns {
        let table: String = row.get("t");
        let declared: String = row.get("ty");
        let nullable: String = row.get("n");
        schema
            .entry(table)
            .or_default()
            .columns
            .insert(row.get("c"), (canonical(&declared), nullable == "NO"));
    }
    // Every index with its columns (0 = an expression), and whether a constraint
    // made it (primary key or unique constraint).
    let indexes = sqlx::query(
        "SELECT t.relname::text AS t, i.relname::text AS i, x.indisunique AS is_unique,
                x.indisprimary AS is_primary, (c.oid IS NOT NULL) AS is_constraint,
                array_to_string(ARRAY(
                    SELECT COALESCE(a.attname::text, '<expr>')
                    FROM unnest(x.indkey::int2[]) WITH ORDINALITY AS k(attnum, n)
                    LEFT JOIN pg_attribute a ON a.attrelid = t.oid AND a.attnum = k.attnum AND k.attnum > 0
                    ORDER BY k.n), ',') AS cols
         FROM pg_index x
         JOIN pg_class i ON i.oid = x.indexrelid
         JOIN pg_class t ON t.oid = x.indrelid
         JOIN pg_namespace s ON s.oid = t.relnamespace AND s.nspname = 'public'
         LEFT JOIN pg_constraint c ON c.conindid = x.indexrelid AND c.contype IN ('p', 'u')
         WHERE t.relname NOT LIKE '\\_sqlx%'",
    )
    .fetch_all(pool)
    .await
    .unwrap();
    for row in indexes {
        let table: String = row.get("t");
        let columns: Vec<String> = row
            .get::<String, _>("cols")
            .split(',')
            .map(str::to_owned)
            .collect();
        let entry = schema.entry(table).or_default();
        if row.get::<bool, _>("is_primary") {
            entry.primary_key = columns;
        } else if row.get::<bool, _>("is_constraint") {
            entry.unique_constraints.insert(columns);
        } else {
            entry
                .indexes
                .insert(row.get("i"), (row.get("is_unique"), columns));
        }
    }
    let keys = sqlx::query(
        "SELECT c.conrelid::regclass::text AS t, c.confrelid::regclass::text AS target,
                array_to_string(ARRAY(
                    SELECT a.attname::text FROM unnest(c.conkey) WITH ORDINALITY AS k(attnum, n)
                    JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = k.attnum
                    ORDER BY k.n), ',') AS cols,
                array_to_string(ARRAY(
                    SELECT a.attname::text FROM unnest(c.confkey) WITH ORDINALITY AS k(attnum, n)
                    JOIN pg_attribute a ON a.attrelid = c.confrelid AND a.attnum = k.attnum
                    ORDER BY k.n), ',') AS refs,
                c.confdeltype::text AS on_delete
         FROM pg_constraint c
         JOIN pg_namespace s ON s.oid = c.connamespace AND s.nspname = 'public'
         WHERE c.contype = 'f'",
    )
    .fetch_all(pool)
    .await
    .unwrap();
    let split = |text: String| text.split(',').map(str::to_owned).collect::<Vec<_>>();
    for row in keys {
        // PostgreSQL's letter for what a delete does, in SQLite's words.
        let on_delete = match row.get::<String, _>("on_delete").as_str() {
            "c" => "CASCADE",
            "n" => "SET NULL",
            "d" => "SET DEFAULT",
            "r" => "RESTRICT",
            _ => "NO ACTION",
        };
        schema
            .entry(row.get("t"))
            .or_default()
            .foreign_keys
            .insert((
                split(row.get("cols")),
                row.get("target"),
                split(row.get("refs")),
                on_delete.to_owned(),
            ));
    }
    schema
}

/// The migrations of one tree: (version, name) in order.
fn numbered(tree: &str) -> Vec<String> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("migrations")
        .join(tree);
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[test]
fn a_migration_number_names_the_same_change_on_both_backends() {
    let (postgres, sqlite) = (numbered("postgres"), numbered("sqlite"));
    assert!(postgres.len() >= 28, "{postgres:?}");
    assert_eq!(postgres, sqlite, "the two trees number their changes alike");
    // Numbered without gaps, so that a missing one is seen.
    for (i, name) in postgres.iter().enumerate() {
        assert!(name.starts_with(&format!("{:04}_", i + 1)), "{name}");
    }
}

#[tokio::test]
async fn both_migration_trees_make_the_same_schema() {
    let Some((url, admin_url, name)) = fresh_postgres().await else {
        return;
    };
    let postgres = Store::connect(&url).await.unwrap();
    adapters::services::operations::migrate(&postgres)
        .await
        .unwrap();
    let path = std::env::temp_dir().join(format!("compliance-schema-{}.db", uuid::Uuid::new_v4()));
    let sqlite = Store::connect(&format!("sqlite://{}", path.display()))
        .await
        .unwrap();
    adapters::services::operations::migrate(&sqlite)
        .await
        .unwrap();
    let on_sqlite = sqlite_schema(&sqlite).await;
    let on_postgres = postgres_schema(&postgres).await;
    sqlite.close().await;
    postgres.close().await;
    drop_postgres(&admin_url, &name).await;
    let _ = std::fs::remove_file(&path);
    assert!(on_sqlite.len() > 40, "{:?}", on_sqlite.keys());
    // The readers see what they compare (a comparison of two empty maps proves nothing).
    for schema in [&on_sqlite, &on_postgres] {
        let queue = &schema["reevaluation_queue"];
        assert_eq!(
            queue.indexes["reevaluation_queue_entity"],
            (
                false,
                ["org_id", "target", "entity_id", "status"]
                    .map(str::to_owned)
                    .to_vec()
            )
        );
        assert_eq!(schema["org_data_keys"].primary_key, ["org_id", "version"]);
        assert_eq!(
            schema["org_data_keys"].columns["version"],
            ("integer".to_owned(), true)
        );
        assert!(schema["pipelines"].unique_constraints.contains(
            ["org_id", "project", "pipeline_name"]
                .map(str::to_owned)
                .as_slice()
        ));
        assert!(schema["organizations"].indexes["organizations_name"]
            .1
            .contains(&"<expr>".to_owned()));
        assert!(
            schema
                .values()
                .map(|table| table.foreign_keys.len())
                .sum::<usize>()
                >= 20,
            "the foreign keys are read"
        );
    }
    let mut differences = Vec::new();
    let names: BTreeSet<&String> = on_sqlite.keys().chain(on_postgres.keys()).collect();
    for table in names {
        match (on_sqlite.get(table), on_postgres.get(table)) {
            (Some(a), Some(b)) if a == b => {}
            (Some(a), Some(b)) => {
                differences.push(format!("{table}:\n  SQLite     {a:?}\n  PostgreSQL {b:?}"))
            }
            (a, _) => differences.push(format!(
                "{table} only on {}",
                if a.is_some() { "SQLite" } else { "PostgreSQL" }
            )),
        }
    }
    assert!(differences.is_empty(), "{}", differences.join("\n"));
}
