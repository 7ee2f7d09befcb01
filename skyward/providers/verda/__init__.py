"""Verda (formerly DataCrunch): GPU and CPU virtual machines through its REST API."""
