"""Tandem's Django project: settings, URLs, ASGI/WSGI, the Celery app, accounts and roles."""

from backend.celery import app as celery_app

__all__ = ["celery_app"]
