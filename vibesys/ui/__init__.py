"""`vibesys ui`: a read-only local web view of the journal, live.

`reader.py` reads the journal without ever writing to it (nor to its `-wal` and `-shm`);
`queries.py` and `views.py` turn rows into what the pages and the JSON API show; `diagram.py`
and `timeline.py` draw the state diagram and the attempts' timeline as SVG on the server;
`app.py` is the Starlette application (token, routes, errors), `events.py` its server-sent
events, and `serve.py` the command. Templates, the stylesheet and the script ship in the
package; nothing is fetched from the network.
"""
