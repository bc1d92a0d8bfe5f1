"""Paraphrased questions about the in-repo sample corpus, each with the page that answers it.

Written to avoid the page titles' own words where a user would, so they exercise meaning,
not string overlap. Shared by the CLI and the mount's search-directory tests.
"""

QUESTIONS: list[tuple[str, str]] = [
    ("how do I point my own web address at the documentation", "customize/custom-domain.mdx"),
    ("show a special page when a link is broken or missing", "customize/custom-404-page.mdx"),
    ("change the typeface used across my site", "customize/fonts.mdx"),
    ("serve the docs under /docs of my website through nginx", "deploy/reverse-proxy.mdx"),
    ("restrict who can read my documentation with a login", "deploy/authentication-setup.mdx"),
    (
        "see how changes from a pull request look before they go live",
        "deploy/preview-deployments.mdx",
    ),
    ("download the whole site so it can be viewed without internet", "deploy/export.mdx"),
    (
        "keep the documentation in a subfolder of a bigger repository with other code",
        "deploy/monorepo.mdx",
    ),
    ("give AI tools a single file that lists all my pages", "ai/llmstxt.mdx"),
    (
        "show the same snippet in several programming languages with a switcher",
        "components/code-groups.mdx",
    ),
    ("highlight a warning or a tip in a colored box", "components/callouts.mdx"),
    (
        "generate interactive API reference pages from my spec file",
        "api-playground/openapi-setup.mdx",
    ),
]
