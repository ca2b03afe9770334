"""Facts about the product image that the services and the operator both rely on.

Invariant: these match the Dockerfile (``useradd --uid 10001``); the pods the operator renders
and the Spark executors' pods run as that user, so files on shared volumes stay writable.
"""

IMAGE_UID = 10001  # the product image's user (Dockerfile: useradd --uid 10001)
