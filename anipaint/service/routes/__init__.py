"""The HTTP routes, one router per area: painting, jobs, styles, operations and the page."""
