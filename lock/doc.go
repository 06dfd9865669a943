package lock
