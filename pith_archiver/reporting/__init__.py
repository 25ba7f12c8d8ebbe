"""What a command tells whoever watches it: progress, repeated findings told once, and the
summary, metrics and notifications a scheduled job sends when it ends."""
