"""The database: its connection and schema, the tables, and every read the service makes."""
