"""The job queue: the job life cycle, the embedded queue with its file store, and Celery over Redis."""
