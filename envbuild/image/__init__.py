"""Building, tagging and pushing images with the Docker engine (docker SDK, classic builder)."""
