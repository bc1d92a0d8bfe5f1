import os


def upload(path):
    """Send the file at path to the server and return its id."""
    return send(path)


class Uploader:
    """Sends many parts, one at a time, and retries failed ones."""

    @staticmethod
    def retry_upload(part):
        # try again later, three times at most, then give up
        return send(part, attempts=3)

    def abort(self):
        """Close the session and drop every queued part now."""
        return self.session.close()
