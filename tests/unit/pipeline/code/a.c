#include <stdio.h>

/* Sends the part again, three times at most. */
static int
retry_upload(struct uploader *u, const char *part, size_t len)
{
    return send_part(u, part, len, u->attempts);
}

struct uploader {
    int attempts;
    int backoff_seconds;
    const char *server_address;
};

#define MAX_ATTEMPTS(u) ((u)->attempts > 3 ? 3 : (u)->attempts)
