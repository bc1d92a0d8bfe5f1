package uploads;

import java.time.Duration;

/** Sends parts to the server, one at a time. */
public class Uploader {
    private int attempts = 3;

    /** Sends the part again, three times at most. */
    @Override
    public void retryUpload(byte[] part) throws IOException {
        send(part, attempts, Duration.ofSeconds(1));
    }

    public Uploader(int attempts) {
        this.attempts = attempts; // three unless told otherwise
    }
}
