"""ingest/server"""
