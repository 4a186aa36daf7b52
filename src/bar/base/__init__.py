"""What every part of bar stands on: running a program, typed records, time, notices, fault points, inotify."""
