// tests/scale/duckdb/run_sql.mjs — runs SQL statements with DuckDB (@duckdb/node-api, installed here by
// `make deps`) in the current folder, so that the queries of docs/scale.md are run by the engine itself.
// Standard input: a JSON list of {"name", "sql"}; each statement runs in order on one in-memory
// database (views first). Standard output: a JSON object, name -> rows (objects, as DuckDB's
// getRowObjectsJson gives them: BIGINTs as text, so that none loses digits). A failing statement:
// its name and DuckDB's message on stderr, exit 1.
import { DuckDBInstance } from '@duckdb/node-api';
import { readFileSync } from 'node:fs';

const statements = JSON.parse(readFileSync(0, 'utf8'));
const db = await DuckDBInstance.create(':memory:');
const connection = await db.connect();
const results = {};
for (const { name, sql } of statements) {
  try {
    const reader = await connection.runAndReadAll(sql);
    results[name] = reader.getRowObjectsJson();
  } catch (error) {
    process.stderr.write(`${name}: ${error.message}\n`);
    process.exit(1);
  }
}
process.stdout.write(JSON.stringify(results));
