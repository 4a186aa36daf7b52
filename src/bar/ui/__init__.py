"""``bar ui``: the review page in the browser, a local web server over ``bar.api``.

``server`` binds and runs it, ``security`` decides who may talk to it, ``app`` maps URLs
to pages and actions, ``views`` reads what a page shows through the library, ``pages``
and ``step_pages`` write the HTML, ``patches`` cuts a patch into its files. ``calls``
pairs an agent's calls with their checkpoints, ``filters`` keeps what a list's filter
asks for, ``board`` and ``search`` are the board and the search across projects. The browser
libraries (diff2html, asciinema-player, ansi_up) are served from ``static/vendor`` when
``make ui-assets`` put them there; without them the page shows plain text.
"""
