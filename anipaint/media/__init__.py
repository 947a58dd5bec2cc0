"""Clips: videos and animated pictures painted frame by frame and steadied along the motion."""
