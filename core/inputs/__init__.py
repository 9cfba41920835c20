"""Inputs the tasks read: image files (``images``)."""
