"""Offline training and evaluation of the reference model (GPU); nothing here is imported by the server."""
