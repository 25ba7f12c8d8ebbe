"""What a run tells whoever watches it: progress, repeated findings told once, and the
summary, metrics and notifications a scheduled run sends when it ends."""
