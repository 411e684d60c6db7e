// libcurl shim: see include/ccurl.h
